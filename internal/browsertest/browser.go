// Package browsertest drives a real browser for tests: headless Chromium
// over the DevTools protocol on a pipe (--remote-debugging-pipe: commands
// on the browser's fd 3, replies and events on its fd 4, each message JSON
// ended by a NUL byte), with no library: a test opens pages, evaluates
// expressions in them, reads what the page logged as errors and what it
// tried to load, and takes screenshots, all in one browser for a test
// binary's pages.
//
// Protocol reference: the Chrome DevTools Protocol's Target, Page, Runtime,
// Log, Network and Emulation domains (chromedevtools.github.io/devtools-protocol).
package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Names of the Chromium executable, Debian's first.
var executables = []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"}

// Find returns the browser's path, or "" when none is installed.
func Find() string {
	if p := os.Getenv("GPUFEED_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range executables {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// Browser is one running headless Chromium.
type Browser struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr bytes.Buffer

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan reply
	events  []Event
	notify  chan struct{}
	dead    error
}

type reply struct {
	Result json.RawMessage
	Err    error
}

// Event is one protocol event.
type Event struct {
	Method    string
	SessionID string
	Params    json.RawMessage
}

type message struct {
	ID        int                       `json:"id,omitempty"`
	Method    string                    `json:"method,omitempty"`
	Params    json.RawMessage           `json:"params,omitempty"`
	Result    json.RawMessage           `json:"result,omitempty"`
	Error     *struct{ Message string } `json:"error,omitempty"`
	SessionID string                    `json:"sessionId,omitempty"`
}

// Start runs the browser with a profile in dir.
func Start(path, dir string) (*Browser, error) {
	toBrowser, browserIn, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	browserOut, fromBrowser, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--disable-sync", "--disable-component-update", "--mute-audio", "--hide-scrollbars",
		"--user-data-dir="+dir, "about:blank")
	cmd.ExtraFiles = []*os.File{toBrowser, fromBrowser} // its fd 3 and fd 4
	b := &Browser{cmd: cmd, in: browserIn, waiting: map[int]chan reply{}, notify: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: &b.stderr, mu: &b.mu}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	toBrowser.Close()
	fromBrowser.Close()
	go b.read(browserOut)
	return b, nil
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (b *Browser) read(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var raw []byte
		raw, err = br.ReadBytes(0)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch := b.waiting[m.ID]; ch != nil {
				delete(b.waiting, m.ID)
				rep := reply{Result: m.Result}
				if m.Error != nil {
					rep.Err = fmt.Errorf("%s", m.Error.Message)
				}
				ch <- rep
			}
		} else if m.Method != "" {
			b.events = append(b.events, Event{Method: m.Method, SessionID: m.SessionID, Params: m.Params})
			close(b.notify)
			b.notify = make(chan struct{})
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.dead = fmt.Errorf("browser connection closed: %v; stderr: %s", err, lastLines(b.stderr.String(), 5))
	for id, ch := range b.waiting {
		ch <- reply{Err: b.dead}
		delete(b.waiting, id)
	}
	close(b.notify)
	b.notify = make(chan struct{})
	b.mu.Unlock()
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// Call sends one command (to a page's session, or the browser's with
// session "") and waits for its result.
func (b *Browser) Call(ctx context.Context, session, method string, params any, result any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	if params == nil {
		p = []byte("{}")
	}
	b.mu.Lock()
	if b.dead != nil {
		b.mu.Unlock()
		return b.dead
	}
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg, _ := json.Marshal(message{ID: id, Method: method, Params: p, SessionID: session})
	if _, err := b.in.Write(append(msg, 0)); err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return fmt.Errorf("%s: %w", method, r.Err)
		}
		if result != nil {
			return json.Unmarshal(r.Result, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Events returns the events seen so far from session, from index from on.
func (b *Browser) Events(session string, from int) ([]Event, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Event
	for _, e := range b.events[from:] {
		if e.SessionID == session {
			out = append(out, e)
		}
	}
	return out, len(b.events)
}

// waitEvent waits for an event of method in session after index from.
func (b *Browser) waitEvent(ctx context.Context, session, method string, from int) error {
	for {
		b.mu.Lock()
		for _, e := range b.events[from:] {
			if e.SessionID == session && e.Method == method {
				b.mu.Unlock()
				return nil
			}
		}
		from = len(b.events)
		ch, dead := b.notify, b.dead
		b.mu.Unlock()
		if dead != nil {
			return dead
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", method, ctx.Err())
		}
	}
}

// Close ends the browser.
func (b *Browser) Close() error {
	_ = b.Call(context.Background(), "", "Browser.close", nil, nil)
	b.in.Close()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	return nil
}

// Page is one tab.
type Page struct {
	b       *Browser
	target  string
	session string
	// first is the index of the page's first event.
	first int
}

// Open opens url in a new tab of width x height CSS pixels and waits for
// its load event.
func (b *Browser) Open(ctx context.Context, url string, width, height int) (*Page, error) {
	var t struct {
		TargetID string `json:"targetId"`
	}
	if err := b.Call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &t); err != nil {
		return nil, err
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &s); err != nil {
		return nil, err
	}
	p := &Page{b: b, target: t.TargetID, session: s.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"} {
		if err := b.Call(ctx, p.session, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := b.Call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	_, p.first = b.Events(p.session, 0)
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.Call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return nil, err
	}
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("open %s: %s", url, nav.ErrorText)
	}
	if err := b.waitEvent(ctx, p.session, "Page.loadEventFired", p.first); err != nil {
		return nil, err
	}
	return p, nil
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// into v.
func (p *Page) Eval(ctx context.Context, expr string, v any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.Call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("%s: %s", expr, r.Exception.Text)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(r.Result.Value, v)
}

// Problems lists what went wrong in the page since it was opened: console
// errors, uncaught exceptions, error log entries (a resource that failed to
// load among them).
func (p *Page) Problems() []string {
	evs, _ := p.b.Events(p.session, p.first)
	var out []string
	for _, e := range evs {
		switch e.Method {
		case "Runtime.consoleAPICalled":
			var c struct {
				Type string `json:"type"`
				Args []struct {
					Value       any    `json:"value"`
					Description string `json:"description"`
				} `json:"args"`
			}
			if json.Unmarshal(e.Params, &c) == nil && (c.Type == "error" || c.Type == "assert") {
				var parts []string
				for _, a := range c.Args {
					parts = append(parts, fmt.Sprint(a.Value, a.Description))
				}
				out = append(out, "console."+c.Type+": "+strings.Join(parts, " "))
			}
		case "Runtime.exceptionThrown":
			var x struct {
				Details struct {
					Text      string `json:"text"`
					Exception struct {
						Description string `json:"description"`
					} `json:"exception"`
				} `json:"exceptionDetails"`
			}
			_ = json.Unmarshal(e.Params, &x)
			out = append(out, "exception: "+x.Details.Text+" "+x.Details.Exception.Description)
		case "Log.entryAdded":
			var l struct {
				Entry struct {
					Level, Text, URL string
				} `json:"entry"`
			}
			if json.Unmarshal(e.Params, &l) == nil && l.Entry.Level == "error" {
				out = append(out, "log: "+l.Entry.Text+" "+l.Entry.URL)
			}
		}
	}
	return out
}

// Requests lists the URLs the page asked for since it was opened.
func (p *Page) Requests() []string {
	evs, _ := p.b.Events(p.session, p.first)
	var out []string
	for _, e := range evs {
		if e.Method == "Network.requestWillBeSent" {
			var r struct {
				Request struct {
					URL string `json:"url"`
				} `json:"request"`
			}
			if json.Unmarshal(e.Params, &r) == nil {
				out = append(out, r.Request.URL)
			}
		}
	}
	return out
}

// Screenshot is a PNG of the page's top height CSS pixels (the whole page
// when height is 0).
func (p *Page) Screenshot(ctx context.Context, height int) ([]byte, error) {
	var m struct {
		CSSContentSize struct {
			Width, Height float64
		} `json:"cssContentSize"`
	}
	if err := p.b.Call(ctx, p.session, "Page.getLayoutMetrics", nil, &m); err != nil {
		return nil, err
	}
	h := m.CSSContentSize.Height
	if height > 0 && float64(height) < h {
		h = float64(height)
	}
	var r struct {
		Data string `json:"data"`
	}
	err := p.b.Call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": h, "scale": 1}}, &r)
	if err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// Close closes the tab.
func (p *Page) Close(ctx context.Context) error {
	return p.b.Call(ctx, "", "Target.closeTarget", map[string]any{"targetId": p.target}, nil)
}

// ErrNoBrowser is returned when no Chromium is installed.
var ErrNoBrowser = errors.New("no Chromium found (chromium, chromium-browser, google-chrome; or GPUFEED_CHROMIUM)")
