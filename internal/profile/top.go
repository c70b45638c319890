package profile

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Top is what sampling one process's Python stacks over a window found,
// the data behind `py-spy top`: per thread, how many samples it was seen
// in, running, holding the GIL, and its distinct stacks (function and file
// of each frame, innermost first) with how often each was seen. From the
// stacks any share is exact (FunctionShares, Share); nested matches count
// once per sample. Lines are the lines of the user's code the thread was at
// (the innermost frame outside installed packages and the standard
// library), with their source text, so a rule can tell a `.item()` from
// other work.
type Top struct {
	PID    int     `json:"pid"`
	Python string  `json:"python,omitempty"`
	Reader string  `json:"reader,omitempty"`
	RateHz float64 `json:"rate_hz"` // rounds per second achieved
	// Rounds is how many times the process was sampled; Seconds the span.
	Rounds  int         `json:"rounds"`
	Seconds float64     `json:"seconds"`
	Skipped int         `json:"skipped,omitempty"` // thread stacks that changed while read, left out
	Threads []TopThread `json:"threads"`
}

// TopThread is one thread's samples.
type TopThread struct {
	TID     int        `json:"tid"`
	Name    string     `json:"name,omitempty"`
	Samples int        `json:"samples"`
	Active  int        `json:"active"` // running (OS state R)
	GIL     int        `json:"gil"`    // holding the GIL
	Stacks  []TopStack `json:"stacks"`
	// Other counts samples whose stack was not kept (past MaxTopStacks
	// distinct stacks).
	Other int       `json:"other,omitempty"`
	Lines []TopLine `json:"lines,omitempty"`
}

// TopStack is one distinct stack and how often it was seen.
type TopStack struct {
	Frames  []Frame `json:"frames"` // Line is 0: a stack is told by its functions
	Samples int     `json:"samples"`
	Active  int     `json:"active"`
}

// TopLine is one line of the user's code a thread was at.
type TopLine struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Source   string `json:"source,omitempty"` // the line's text, trimmed; "" when unreadable
	Samples  int    `json:"samples"`
	Active   int    `json:"active"`
}

// Bounds on one Top, kept by whoever fills it and checked by ParseTop.
const (
	MaxTopThreads     = 256
	MaxTopStacks      = 256
	MaxTopStackFrames = 128
	MaxTopLines       = 32
	maxTopText        = 8 << 20
	maxTopString      = 4096
)

// ErrTop is wrapped by every ParseTop error.
var ErrTop = errors.New("python samples")

// FormatTop writes t as the text a timeline keeps (JSON).
func FormatTop(t Top) (string, error) {
	b, err := json.Marshal(t)
	return string(b), err
}

// ParseTop reads FormatTop's text back, checking every count and bound:
// the text comes from a recording, which may be truncated or edited.
func ParseTop(s string) (Top, error) {
	var t Top
	if len(s) > maxTopText {
		return t, fmt.Errorf("%w: %d bytes, more than %d", ErrTop, len(s), maxTopText)
	}
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return Top{}, fmt.Errorf("%w: %v", ErrTop, err)
	}
	if t.PID <= 0 || t.Rounds < 0 || t.Seconds < 0 || t.RateHz < 0 || t.Skipped < 0 {
		return Top{}, fmt.Errorf("%w: pid %d, rounds %d, seconds %g, rate %g: expected positive counts", ErrTop, t.PID, t.Rounds, t.Seconds, t.RateHz)
	}
	if len(t.Threads) > MaxTopThreads {
		return Top{}, fmt.Errorf("%w: %d threads, more than %d", ErrTop, len(t.Threads), MaxTopThreads)
	}
	for _, th := range t.Threads {
		if th.Samples < 0 || th.Active < 0 || th.GIL < 0 || th.Other < 0 || th.Active > th.Samples || th.GIL > th.Samples || th.Samples > t.Rounds {
			return Top{}, fmt.Errorf("%w: thread %d: samples %d, active %d, gil %d over %d rounds: expected 0 <= active, gil <= samples <= rounds", ErrTop, th.TID, th.Samples, th.Active, th.GIL, t.Rounds)
		}
		if len(th.Stacks) > MaxTopStacks || len(th.Lines) > MaxTopLines {
			return Top{}, fmt.Errorf("%w: thread %d: %d stacks, %d lines: more than %d, %d", ErrTop, th.TID, len(th.Stacks), len(th.Lines), MaxTopStacks, MaxTopLines)
		}
		sum, active := th.Other, 0
		for _, st := range th.Stacks {
			sum += st.Samples
			active += st.Active
			if st.Samples <= 0 || st.Active < 0 || st.Active > st.Samples || len(st.Frames) > MaxTopStackFrames {
				return Top{}, fmt.Errorf("%w: thread %d: a stack of %d frames seen %d times (%d active): expected 1 or more, at most %d frames", ErrTop, th.TID, len(st.Frames), st.Samples, st.Active, MaxTopStackFrames)
			}
			for _, f := range st.Frames {
				if len(f.Function) > maxTopString || len(f.File) > maxTopString || f.Line < 0 {
					return Top{}, fmt.Errorf("%w: thread %d: a frame name longer than %d", ErrTop, th.TID, maxTopString)
				}
			}
		}
		if sum > th.Samples || active > th.Active {
			return Top{}, fmt.Errorf("%w: thread %d: its stacks were seen %d times (%d running), more than its %d samples (%d running)", ErrTop, th.TID, sum, active, th.Samples, th.Active)
		}
		for _, l := range th.Lines {
			if l.Samples < 0 || l.Samples > th.Samples || l.Active < 0 || l.Active > l.Samples || l.Line < 0 ||
				len(l.Function) > maxTopString || len(l.File) > maxTopString || len(l.Source) > maxTopString {
				return Top{}, fmt.Errorf("%w: thread %d, line %.80q:%d: %d samples of %d: expected at most the thread's", ErrTop, th.TID, l.File, l.Line, l.Samples, th.Samples)
			}
		}
	}
	return t, nil
}

// Share is how many of a thread's samples matched, of how many.
type Share struct {
	Samples, Active int // matching samples, and those the thread ran in
	Of, OfActive    int // the thread's samples, and those it ran in
}

// Fraction is Samples/Of, 0 when Of is 0.
func (s Share) Fraction() float64 {
	if s.Of == 0 {
		return 0
	}
	return float64(s.Samples) / float64(s.Of)
}

// Share counts the samples whose stack holds a frame match accepts.
func (th TopThread) Share(match func(Frame) bool) Share {
	s := Share{Of: th.Samples, OfActive: th.Active}
	for _, st := range th.Stacks {
		for _, f := range st.Frames {
			if match(f) {
				s.Samples += st.Samples
				s.Active += st.Active
				break
			}
		}
	}
	return s
}

// FunctionShare is one function's share of a thread's samples: as the
// innermost frame (own) and anywhere on the stack (total), py-spy top's
// %Own and %Total.
type FunctionShare struct {
	Function, File string
	Own, Total     int
}

// FunctionShares lists a thread's functions by total, then own samples.
func (th TopThread) FunctionShares() []FunctionShare {
	type key struct{ fn, file string }
	m := map[key]*FunctionShare{}
	for _, st := range th.Stacks {
		seen := map[key]bool{}
		for i, f := range st.Frames {
			k := key{f.Function, f.File}
			fs := m[k]
			if fs == nil {
				fs = &FunctionShare{Function: f.Function, File: f.File}
				m[k] = fs
			}
			if i == 0 {
				fs.Own += st.Samples
			}
			if !seen[k] {
				seen[k] = true
				fs.Total += st.Samples
			}
		}
	}
	out := make([]FunctionShare, 0, len(m))
	for _, v := range m {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Total != b.Total {
			return a.Total > b.Total
		}
		if a.Own != b.Own {
			return a.Own > b.Own
		}
		return a.Function+a.File < b.Function+b.File
	})
	return out
}
