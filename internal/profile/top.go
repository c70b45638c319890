package profile

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// PySamples is what sampling one process's Python stacks over a window found,
// the data behind `py-spy top`: per thread, how many samples it was seen
// in, running, holding the GIL, and its distinct stacks (function and file
// of each frame, innermost first) with how often each was seen. From the
// stacks any share is exact (FunctionShares, Share); nested matches count
// once per sample. Lines are the lines of the user's code the thread was at
// (the innermost frame outside installed packages and the standard
// library), with their source text, so a rule can tell a `.item()` from
// other work.
type PySamples struct {
	PID    int     `json:"pid"`
	Python string  `json:"python,omitempty"`
	Reader string  `json:"reader,omitempty"`
	RateHz float64 `json:"rate_hz"` // rounds per second achieved
	// Rounds is how many times the process was sampled; Seconds the span.
	Rounds  int              `json:"rounds"`
	Seconds float64          `json:"seconds"`
	Skipped int              `json:"skipped,omitempty"` // thread stacks that changed while read, left out
	Threads []PySampleThread `json:"threads"`
}

// PySampleThread is one thread's samples.
type PySampleThread struct {
	TID     int             `json:"tid"`
	Name    string          `json:"name,omitempty"`
	Samples int             `json:"samples"`
	Active  int             `json:"active"` // running (OS state R)
	GIL     int             `json:"gil"`    // holding the GIL
	Stacks  []PySampleStack `json:"stacks"`
	// Other counts samples whose stack was not kept (past MaxPySampleStacks
	// distinct stacks).
	Other int            `json:"other,omitempty"`
	Lines []PySampleLine `json:"lines,omitempty"`
}

// PySampleStack is one distinct stack and how often it was seen.
type PySampleStack struct {
	Frames  []Frame `json:"frames"` // Line is 0: a stack is told by its functions
	Samples int     `json:"samples"`
	Active  int     `json:"active"`
}

// PySampleLine is one line of the user's code a thread was at.
type PySampleLine struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Source   string `json:"source,omitempty"` // the line's text, trimmed; "" when unreadable
	Samples  int    `json:"samples"`
	Active   int    `json:"active"`
}

// Bounds on one PySamples, kept by whoever fills it and checked by ParsePySamples.
const (
	MaxPySampleThreads     = 256
	MaxPySampleStacks      = 256
	MaxPySampleStackFrames = 128
	MaxPySampleLines       = 32
	maxPySampleText        = 8 << 20
	maxPySampleString      = 4096
)

// ErrPySamples is wrapped by every ParsePySamples error.
var ErrPySamples = errors.New("python samples")

// FormatPySamples writes t as the text a timeline keeps (JSON).
func FormatPySamples(t PySamples) (string, error) {
	b, err := json.Marshal(t)
	return string(b), err
}

// ParsePySamples reads FormatPySamples's text back, checking every count and bound:
// the text comes from a recording, which may be truncated or edited.
func ParsePySamples(s string) (PySamples, error) {
	var t PySamples
	if len(s) > maxPySampleText {
		return t, fmt.Errorf("%w: %d bytes, more than %d", ErrPySamples, len(s), maxPySampleText)
	}
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return PySamples{}, fmt.Errorf("%w: %v", ErrPySamples, err)
	}
	if t.PID <= 0 || t.Rounds < 0 || t.Seconds < 0 || t.RateHz < 0 || t.Skipped < 0 {
		return PySamples{}, fmt.Errorf("%w: pid %d, rounds %d, seconds %g, rate %g: expected positive counts", ErrPySamples, t.PID, t.Rounds, t.Seconds, t.RateHz)
	}
	if len(t.Threads) > MaxPySampleThreads {
		return PySamples{}, fmt.Errorf("%w: %d threads, more than %d", ErrPySamples, len(t.Threads), MaxPySampleThreads)
	}
	for _, th := range t.Threads {
		if th.Samples < 0 || th.Active < 0 || th.GIL < 0 || th.Other < 0 || th.Active > th.Samples || th.GIL > th.Samples || th.Samples > t.Rounds {
			return PySamples{}, fmt.Errorf("%w: thread %d: samples %d, active %d, gil %d over %d rounds: expected 0 <= active, gil <= samples <= rounds", ErrPySamples, th.TID, th.Samples, th.Active, th.GIL, t.Rounds)
		}
		if len(th.Stacks) > MaxPySampleStacks || len(th.Lines) > MaxPySampleLines {
			return PySamples{}, fmt.Errorf("%w: thread %d: %d stacks, %d lines: more than %d, %d", ErrPySamples, th.TID, len(th.Stacks), len(th.Lines), MaxPySampleStacks, MaxPySampleLines)
		}
		sum, active := th.Other, 0
		for _, st := range th.Stacks {
			sum += st.Samples
			active += st.Active
			if st.Samples <= 0 || st.Active < 0 || st.Active > st.Samples || len(st.Frames) > MaxPySampleStackFrames {
				return PySamples{}, fmt.Errorf("%w: thread %d: a stack of %d frames seen %d times (%d active): expected 1 or more, at most %d frames", ErrPySamples, th.TID, len(st.Frames), st.Samples, st.Active, MaxPySampleStackFrames)
			}
			for _, f := range st.Frames {
				if len(f.Function) > maxPySampleString || len(f.File) > maxPySampleString || f.Line < 0 {
					return PySamples{}, fmt.Errorf("%w: thread %d: a frame name longer than %d", ErrPySamples, th.TID, maxPySampleString)
				}
			}
		}
		if sum > th.Samples || active > th.Active {
			return PySamples{}, fmt.Errorf("%w: thread %d: its stacks were seen %d times (%d running), more than its %d samples (%d running)", ErrPySamples, th.TID, sum, active, th.Samples, th.Active)
		}
		for _, l := range th.Lines {
			if l.Samples < 0 || l.Samples > th.Samples || l.Active < 0 || l.Active > l.Samples || l.Line < 0 ||
				len(l.Function) > maxPySampleString || len(l.File) > maxPySampleString || len(l.Source) > maxPySampleString {
				return PySamples{}, fmt.Errorf("%w: thread %d, line %.80q:%d: %d samples of %d: expected at most the thread's", ErrPySamples, th.TID, l.File, l.Line, l.Samples, th.Samples)
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
func (th PySampleThread) Share(match func(Frame) bool) Share {
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
func (th PySampleThread) FunctionShares() []FunctionShare {
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
