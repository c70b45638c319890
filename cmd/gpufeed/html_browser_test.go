package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/browsertest"
	"github.com/gpufeed/gpufeed/internal/livetest"
)

// pageState is what the browser test reads from a rendered page.
type pageState struct {
	Class    string `json:"cls"`
	Summary  string `json:"summary"`
	Drawn    string `json:"drawn"`
	Points   []int  `json:"points"`
	Series   []int  `json:"series"`
	Canvases int    `json:"canvases"`
	Errors   string `json:"errors"`
	Findings int    `json:"findings"`
}

const pageStateJS = `JSON.stringify({
  cls: (document.getElementById("verdict-class") || {}).textContent || "",
  summary: (document.getElementById("verdict-summary") || {}).textContent || "",
  drawn: document.body.getAttribute("data-charts-drawn") || "",
  points: Array.from(document.querySelectorAll(".chart")).map(e => +e.getAttribute("data-points")),
  series: Array.from(document.querySelectorAll(".chart")).map(e => +e.getAttribute("data-series")),
  canvases: document.querySelectorAll(".chart canvas").length,
  errors: document.getElementById("gpufeed-errors").textContent,
  findings: document.querySelectorAll(".finding").length
})`

// browser starts headless Chromium for the test, or skips it when none is
// installed (scripts/test.sh installs it and sets GPUFEED_REQUIRE_BROWSER,
// so that CI fails instead).
func browser(t *testing.T) *browsertest.Browser {
	t.Helper()
	path := browsertest.Find()
	if path == "" {
		if os.Getenv("GPUFEED_REQUIRE_BROWSER") != "" {
			t.Fatal(browsertest.ErrNoBrowser)
		}
		t.Skip(browsertest.ErrNoBrowser)
	}
	b, err := browsertest.Start(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// screenshotDir is where screenshots go: $GPUFEED_SCREENSHOTS, else the
// test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("GPUFEED_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// openReport renders args' HTML to a file, opens it in b and checks what
// every page must hold: no script error, nothing loaded but the file, each
// chart drawn on a canvas.
func openReport(t *testing.T, ctx context.Context, b *browsertest.Browser, dir, name string, args ...string) (pageState, *browsertest.Page) {
	t.Helper()
	out, stderr, code := run(t, append(args, "-o", "html")...)
	if out == "" || (code != 0 && args[0] != "check") { // check exits 1 when a check fails, with its report
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	file := filepath.Join(dir, name+".html")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "file://" + file
	p, err := b.Open(ctx, url, 1200, 900)
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := p.Eval(ctx, pageStateJS, &raw); err != nil {
		t.Fatal(err)
	}
	var st pageState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	if pr := p.Problems(); len(pr) > 0 || st.Errors != "" {
		t.Errorf("%s: errors in the page: %v %s", name, pr, st.Errors)
	}
	for _, r := range p.Requests() {
		if r != url {
			t.Errorf("%s: the page loaded %s: it must load nothing but itself", name, r)
		}
	}
	if st.Drawn != itoa(len(st.Points)) || st.Canvases < len(st.Points) {
		t.Errorf("%s: %s of %d charts drawn, %d canvases", name, st.Drawn, len(st.Points), st.Canvases)
	}
	return st, p
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Every demo scenario's recorded report, and a trace's, rendered by a real
// browser: the verdict on top is the report's, the timeline has a point for
// every interval judged, nothing fails in the page and nothing is fetched;
// one screenshot each.
func TestHTMLReportsInABrowser(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	b := browser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, shots := t.TempDir(), screenshotDir(t)
	recs, err := filepath.Glob("testdata/demo-*.gpufeed")
	if err != nil || len(recs) < 10 {
		t.Fatalf("demo recordings: %v %v", recs, err)
	}
	for _, rec := range recs {
		name := strings.TrimSuffix(filepath.Base(rec), ".gpufeed")
		t.Run(name, func(t *testing.T) {
			js, stderr, code := run(t, "report", "-o", "json", rec)
			if code != 0 {
				t.Fatalf("report: exit %d: %s", code, stderr)
			}
			var want struct {
				Verdict struct {
					Class   string `json:"class"`
					Summary string `json:"summary"`
				} `json:"verdict"`
				Window struct {
					Samples int `json:"samples"`
				} `json:"window"`
				Findings []json.RawMessage `json:"findings"`
			}
			if err := json.Unmarshal([]byte(js), &want); err != nil {
				t.Fatal(err)
			}
			st, p := openReport(t, ctx, b, dir, name, "report", rec)
			if st.Class != want.Verdict.Class || st.Summary != want.Verdict.Summary {
				t.Errorf("page verdict %q %q, report says %q %q", st.Class, st.Summary, want.Verdict.Class, want.Verdict.Summary)
			}
			if len(st.Points) != 1 || st.Points[0] != want.Window.Samples-1 {
				t.Errorf("timeline points %v, want one chart of %d intervals", st.Points, want.Window.Samples-1)
			}
			if len(st.Series) == 1 && st.Series[0] < 4 {
				t.Errorf("timeline draws %d series: GPU, launch thread running and waiting, iowait at least", st.Series[0])
			}
			if st.Findings != len(want.Findings) {
				t.Errorf("%d findings on the page, %d in the report", st.Findings, len(want.Findings))
			}
			png, err := p.Screenshot(ctx, 1100)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shots, "html-"+name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
			_ = p.Close(ctx)
		})
	}
	t.Run("trace", func(t *testing.T) {
		st, p := openReport(t, ctx, b, dir, "trace-alexnet", "trace", "../../testdata/traces/critical_path/alexnet")
		if st.Class == "" || len(st.Points) != 1 || st.Points[0] != traceBinsWanted {
			t.Errorf("trace page: verdict %q, points %v (want one chart of %d bins)", st.Class, st.Points, traceBinsWanted)
		}
		png, err := p.Screenshot(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, "html-trace-alexnet.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("check", func(t *testing.T) {
		st, _ := openReport(t, ctx, b, dir, "check", "check", "--root", filepath.Join("..", "..", "testdata", "check", "server"), "--device", "none", "--duration", "0")
		if len(st.Points) != 0 {
			t.Errorf("check page draws %v: it has no timeline", st.Points)
		}
	})
}

// traceBinsWanted: the alexnet trace spans 12.9 s, far more than a
// microsecond per bin, so its timeline has all of render's bins.
const traceBinsWanted = 600
