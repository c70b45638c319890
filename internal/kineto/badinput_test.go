package kineto

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// realTrace is a real 15 MB (uncompressed) Kineto trace; cut short, its last
// four bytes are deflate data that a reader trusting gzip's trailer takes
// for the uncompressed size.
var realTrace = filepath.Join("..", "..", "testdata", "traces", "ns_resolution_trace", "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")

// TestNegativeTimestampDropped: docs/TRACE.md says an event whose ts is
// negative is dropped and counted; one kept inflated the span from 5 ms to
// 1006 s.
func TestNegativeTimestampDropped(t *testing.T) {
	src := `{"traceEvents": [
{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000, "dur": 5, "args": {"stream": 7, "correlation": 1}},
{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": -1000000000, "dur": 5, "args": {"stream": 7, "correlation": 2}},
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": -3, "dur": 5}
]}`
	tr := decodeString(t, src, Options{})
	if len(tr.GPU) != 1 || len(tr.CPU) != 0 || tr.Counts.BadTime != 2 {
		t.Errorf("gpu %d cpu %d bad-time %d; want the two negative-ts events dropped and counted", len(tr.GPU), len(tr.CPU), tr.Counts.BadTime)
	}
	if !hasWarning(tr, "dropped 2 events", "negative ts", "byte offset 144") {
		t.Errorf("warnings %q: want one naming the count, the reason and the first one's offset", tr.Warnings)
	}
}

// TestKernelOutsideWindowDropped: a kernel of 2.5 h in a trace whose
// profiler span is 5 ms is no time the profiler recorded: dropped, counted
// and warned about, as negative times are. Kept, it made the trace 2.5 h
// long and the GPU busy all of it. A kernel a little past the span (a
// flush) and a CPU annotation far past it (Kineto closes an open
// ProfilerStep range late) are kept.
func TestKernelOutsideWindowDropped(t *testing.T) {
	src := `{"traceEvents": [
{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1000, "dur": 5000},
{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1500, "dur": 50, "args": {"stream": 7, "correlation": 1}},
{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2000, "dur": 9000000000, "args": {"stream": 7, "correlation": 2}},
{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5900, "dur": 600, "args": {"stream": 7, "correlation": 3}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 5500, "dur": 13000000}
]}`
	tr := decodeString(t, src, Options{})
	if len(tr.GPU) != 2 || tr.Counts.GPUOps != 2 || len(tr.CPU) != 1 || tr.Counts.BadTime != 1 {
		t.Errorf("gpu %d (count %d) cpu %d bad-time %d; want the 2.5 h kernel alone dropped and counted", len(tr.GPU), tr.Counts.GPUOps, len(tr.CPU), tr.Counts.BadTime)
	}
	for _, g := range tr.GPU {
		if g.Dur() > 1000000 {
			t.Errorf("kept a kernel of %d ns", g.Dur())
		}
	}
	if !hasWarning(tr, "dropped 1 event lying more than the profiled window's length outside it", "5ms of profiler span", "ends 2h29m59.99") {
		t.Errorf("warnings %q: want one naming the count, the window and why", tr.Warnings)
	}
	if err := tr.Check(); err != nil {
		t.Error(err)
	}
}

// TestNotATrace: JSON that is not a Chrome trace is an error saying what
// the file is not and, where it can tell, what it is.
func TestNotATrace(t *testing.T) {
	var rec bytes.Buffer
	if err := timeline.Encode(&rec, &timeline.Timeline{Meta: timeline.Meta{Tool: "gpufeed test"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"empty object", `{}`, []string{"x.json: not a Chrome trace", "an empty JSON object"}},
		{"config", `{"lr": 0.1, "batch_size": 32}`, []string{"not a Chrome trace", `no "traceEvents"`, `"lr", "batch_size"`}},
		{"recording", rec.String(), []string{"not a Chrome trace", "a gpufeed recording", "gpufeed report"}},
	} {
		_, err := Decode(strings.NewReader(tc.src), "x.json", Options{})
		var nt *NotTraceError
		if !errors.As(err, &nt) {
			t.Errorf("%s: err = %v, want a NotTraceError", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
	if recordingFormat != timeline.FormatName {
		t.Errorf("recordingFormat %q, the recorder writes %q", recordingFormat, timeline.FormatName)
	}
}

// TestTrailingData: bytes after the trace object are an error when the
// trace held no events (nothing to keep: the file is something else), and
// a warning with their offset when it did (the events are kept).
func TestTrailingData(t *testing.T) {
	for _, src := range []string{`{"traceEvents": []} garbage`, `[] {"ph": "X"}`, `{"traceEvents": []}{"traceEvents": []}`} {
		_, err := Decode(strings.NewReader(src), "x.json", Options{ChunkBytes: 8})
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, "after the end of the trace") {
			t.Errorf("%q: err = %v, want a syntax error at the trailing bytes", src, err)
		}
	}
	ev := `{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"stream": 7}}`
	for _, src := range []string{`{"traceEvents": [` + ev + `]} garbage`, `[` + ev + `]xyz`} {
		for _, size := range []int{8, 1 << 20} {
			tr, err := Decode(strings.NewReader(src), "x.json", Options{ChunkBytes: size})
			if err != nil {
				t.Fatalf("%q: %v", src, err)
			}
			if len(tr.GPU) != 1 || !hasWarning(tr, "x.json: byte offset", "after the end of the trace") {
				t.Errorf("%q: gpu %d warnings %q; want the event kept and a warning with the offset", src, len(tr.GPU), tr.Warnings)
			}
		}
	}
}

// TestEventsWithoutPhase: an event without "ph" is not silently lost: it is
// counted and a warning gives the count and the first one's offset.
func TestEventsWithoutPhase(t *testing.T) {
	src := `{"traceEvents": [
{"cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2},
{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 2, "args": {"stream": 7}},
{"cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}
]}`
	for _, size := range []int{16, 1 << 20} {
		tr := decodeString(t, src, Options{ChunkBytes: size})
		if tr.Counts.NoPhase != 2 || len(tr.GPU) != 1 {
			t.Errorf("no-phase %d gpu %d, want 2 and 1", tr.Counts.NoPhase, len(tr.GPU))
		}
		if !hasWarning(tr, `2 events have no "ph"`, "byte offset 18") {
			t.Errorf("warnings %q", tr.Warnings)
		}
	}
}

// TestGzipErrorPrefix: the gzip package's errors already say "gzip:".
func TestGzipErrorPrefix(t *testing.T) {
	_, err := Decode(strings.NewReader("\x1f\x8bnot really gzip at all"), "x.json.gz", Options{})
	if err == nil || strings.Count(err.Error(), "gzip:") != 1 || !strings.HasPrefix(err.Error(), "x.json.gz: ") {
		t.Errorf("err = %v, want the file named and one gzip: prefix", err)
	}
}

// TestSizeHintOfCutGzip: a gzip file cut short ends in deflate data, not in
// a trailer; its last four bytes are no size. The hint must stay near what
// the file holds (the size only sizes memory: it is a hint, never a limit).
func TestSizeHintOfCutGzip(t *testing.T) {
	b, err := os.ReadFile(realTrace)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, cut := range []int{300_000, 500_000, 709_000, 1_000_000, len(b)} {
		p := filepath.Join(dir, "cut.json.gz")
		if err := os.WriteFile(p, b[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		// What the cut file really holds.
		zr, _ := gzip.NewReader(bytes.NewReader(b[:cut]))
		var held int64
		buf := make([]byte, 1<<20)
		for {
			n, err := zr.Read(buf)
			held += int64(n)
			if err != nil {
				break
			}
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		hint := SizeHint(f)
		f.Close()
		if float64(hint) > 1.5*float64(held) || float64(hint) < 0.5*float64(held) {
			t.Errorf("cut at %d: size hint %d, the file holds %d bytes of JSON", cut, hint, held)
		}
		if cut == len(b) && hint != held {
			t.Errorf("whole file: size hint %d, want the exact %d (the trailer is right)", hint, held)
		}
	}
}
