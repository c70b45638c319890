package sample

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// Live: a window asked for longer than its memory budget holds ends at the
// budget (never past it), judged as far as it went, with a note saying how
// long it ran, why, and the interval that would have held the whole
// window; the caller was warned after the first tick. Unbounded, a long
// window of a large job held every thread's sample of every tick (an hour
// of 1,000 threads at 100 ms: about 6 GB).
func TestWindowEndsAtItsMemoryBudget(t *testing.T) {
	livetest.Need(t)
	pid, _ := startLoad(t, "threads:300")
	// The budget fits 30 ticks of the job's threads: a window of 20 s at
	// 100 ms would hold 201 ticks; one of 41 ticks (every 500 ms) fits.
	live := countThreads(t, pid)
	budget := live * 41
	var warned []string
	s, err := New(Config{PID: pid, Duration: 20 * time.Second, Interval: 100 * time.Millisecond, Tool: "test",
		MaxSamples: budget, MinIntervals: 20, Warn: func(m string) { warned = append(warned, m) }})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, tk := range tl.Ticks {
		held += len(tk.Threads)
	}
	if tl.Meta.Ended != EndedBudget || held > budget || len(tl.Ticks) < 38 || time.Since(t0) > 15*time.Second {
		t.Fatalf("ended %q after %v with %d ticks holding %d samples; want %q at no more than %d samples (41 ticks)",
			tl.Meta.Ended, time.Since(t0), len(tl.Ticks), held, EndedBudget, budget)
	}
	note := strings.Join(tl.Meta.Notes, "\n")
	for _, want := range []string{"The window ended after 4", "of the 20s asked: it held " + thousands(held) + " thread samples (" + thousands(live) + " threads every 100ms)",
		"the most gpufeed keeps in memory for one window. A longer interval holds fewer: --interval 500ms would watch this job for the whole window."} {
		if !strings.Contains(note, want) {
			t.Errorf("notes %q: want %q", note, want)
		}
	}
	want := thousands(live) + " threads sampled every 100ms fill gpufeed's memory budget for one window (" + thousands(budget) +
		" thread samples) in about 4.1s: the window will end there, before the 20s asked; --interval 500ms watches it all"
	if len(warned) != 1 || !strings.Contains(warned[0], want) {
		t.Errorf("warned %q; want one warning, after the first tick: %q", warned, want)
	}
}

// countThreads is how many threads pid has, steady over half a second.
func countThreads(t *testing.T, pid int) int {
	t.Helper()
	n := -1
	for range 50 {
		e, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		if len(e) == n {
			return n
		}
		n = len(e)
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("pid %d's thread count did not settle", pid)
	return 0
}

// The interval offered fits the whole window in the budget, is round, and
// is offered only where it leaves the window the intervals a verdict needs.
func TestBudgetInterval(t *testing.T) {
	for _, c := range []struct {
		live, max int
		dur       time.Duration
		want      time.Duration
	}{
		{1000, 2_000_000, time.Hour, 2 * time.Second},               // 1801 ticks of 1,000
		{1000, 2_000_000, 10 * time.Minute, 400 * time.Millisecond}, // 200 s at 100 ms
		{10000, 2_000_000, time.Minute, 400 * time.Millisecond},
		{1000, 2_000_000, 100 * time.Second, 0},           // fits at the default
		{100_000, 2_000_000, 20 * time.Second, 0},         // 1 s intervals would leave 20
		{50_000, 2_000_000, time.Minute, 2 * time.Second}, // 31 ticks
		{100_000, 2_000_000, time.Hour, 0},                // 20 ticks at most: 19 intervals
		{2_000_000, 2_000_000, time.Hour, 0},
	} {
		s := &Sampler{cfg: Config{Interval: 100 * time.Millisecond, Duration: c.dur, MaxSamples: c.max, MinIntervals: 20}}
		got := s.budgetInterval(c.live)
		if got != c.want {
			t.Errorf("%d threads, %d samples, %v: interval %v, want %v", c.live, c.max, c.dur, got, c.want)
		}
		if got > 0 && int64(c.live)*(int64(c.dur/got)+1) > int64(c.max) {
			t.Errorf("%d threads over %v every %v overflow %d samples", c.live, c.dur, got, c.max)
		}
	}
}
