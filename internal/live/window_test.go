package live

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

func loadRecording(t testing.TB, name string) *timeline.Timeline {
	t.Helper()
	path := filepath.Join("..", "..", "cmd", "gpufeed", "testdata", name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl, _, err := timeline.Decode(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// replay feeds a recorded timeline to w as the sampler would: the
// facts first, then tick after tick.
func replay(w *Window, tl *timeline.Timeline) {
	_ = w.WriteMeta(tl.Meta)
	_ = w.WriteDevices(tl.Devices)
	for _, p := range tl.Procs {
		_ = w.WriteProc(p)
	}
	for _, th := range tl.Threads {
		_ = w.WriteThread(th)
	}
	ev := 0
	for i := range tl.Ticks {
		for ev < len(tl.Events) && tl.Events[ev].T <= tl.Ticks[i].T {
			_ = w.WriteEvent(tl.Events[ev])
			ev++
		}
		_ = w.WriteTick(&tl.Ticks[i])
	}
}

// A window keeps its span and no more, and judging the whole recording
// through it gives the report's own verdict.
func TestWindowKeepsItsSpanAndJudgesAsReport(t *testing.T) {
	tl := loadRecording(t, "demo-submission-bound.gpufeed")
	w := NewWindow(3 * time.Second)
	var covered []time.Duration
	w.OnTick = func(w *Window) { covered = append(covered, w.Covered()) }
	replay(w, tl)
	if len(covered) != len(tl.Ticks) {
		t.Fatalf("OnTick ran %d times for %d ticks", len(covered), len(tl.Ticks))
	}
	for i, c := range covered {
		if c > 3*time.Second+150*time.Millisecond {
			t.Fatalf("tick %d: the window covers %v, more than its 3 s span", i, c)
		}
	}
	if c := covered[len(covered)-1]; c < 2900*time.Millisecond {
		t.Errorf("the full window covers %v, want about 3 s", c)
	}
	r := w.Judge()
	if r.Verdict == nil || r.Verdict.Class != "submission-bound" || len(r.Series.Intervals) != w.Ticks()-1 {
		t.Errorf("the last 3 s of the submission-bound demo: %+v over %d intervals", r.Verdict, len(r.Series.Intervals))
	}
	// A window as long as the recording is the recording.
	whole := NewWindow(time.Minute)
	replay(whole, tl)
	if got := whole.Judge(); got.Verdict.Class != r.Verdict.Class || got.Window.Samples != len(tl.Ticks) {
		t.Errorf("whole window: %s over %d samples", got.Verdict.Class, got.Window.Samples)
	}
}

// What judging the last 10 s costs (the live view and -o jsonl do it once a
// second): the biggest demo recording, 100 intervals.
func BenchmarkJudgeWindow(b *testing.B) {
	tl := loadRecording(b, "demo-oversubscribed.gpufeed")
	w := NewWindow(10 * time.Second)
	replay(w, tl)
	b.ResetTimer()
	for b.Loop() {
		_ = w.Judge()
	}
}
