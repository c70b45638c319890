package sample

import (
	"context"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// The window from the first tick to the last covers the requested duration,
// even when the first tick comes late (the target's threads are opened
// before it): a requested 2 s window is never 1.998 s.
func TestWindowCoversTheRequestedDuration(t *testing.T) {
	livetest.Need(t)
	pid, _ := startLoad(t, "threads:300")
	const d = 500 * time.Millisecond
	for range 3 {
		s, err := New(Config{PID: pid, Duration: d, Interval: 100 * time.Millisecond, Tool: "test"})
		if err != nil {
			t.Fatal(err)
		}
		tl, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := len(tl.Ticks)
		if w := time.Duration(tl.Ticks[n-1].T - tl.Ticks[0].T); w < d || tl.Meta.Ended != "duration" {
			t.Errorf("window %v (first tick at %v, %d ticks, ended %q), want at least %v",
				w, time.Duration(tl.Ticks[0].T), n, tl.Meta.Ended, d)
		}
	}
}

// A window shorter than ten slow periods reads the slow tier ten times
// still (every tenth of the window, at most every 250 ms): where a
// sleeping launch thread waits is read there, and three readings over a
// 3 s window left a third of its sleep to one unlucky reading. A longer
// window keeps the 1 s tier; a tier set by the caller (the agent's) is
// kept as set.
func TestSlowTierScalesWithAShortWindow(t *testing.T) {
	for _, c := range []struct{ duration, slow, want time.Duration }{
		{2 * time.Second, 0, 250 * time.Millisecond},
		{3 * time.Second, 0, 300 * time.Millisecond},
		{5 * time.Second, 0, 500 * time.Millisecond},
		{10 * time.Second, 0, time.Second},
		{60 * time.Second, 0, time.Second},
		{time.Second, 0, 250 * time.Millisecond},
		{3 * time.Second, 10 * time.Second, 10 * time.Second},
		{3 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond},
	} {
		cfg := Config{Duration: c.duration, SlowEvery: c.slow}
		cfg.defaults()
		if cfg.SlowEvery != c.want {
			t.Errorf("window %v, slow tier set to %v: every %v, want %v", c.duration, c.slow, cfg.SlowEvery, c.want)
		}
	}
}

// Live: over a 3 s window the sampler reads where a sleeping thread waits
// on at least eight ticks (it read it on three at one a second), and says
// the tier's period in the timeline.
func TestShortWindowReadsWaitsOften(t *testing.T) {
	livetest.Need(t)
	pid, tids := startLoad(t, "spin-sleep")
	s, err := New(Config{PID: pid, Duration: 3 * time.Second, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sleeper := tids["sleep"][0]
	read := 0
	for _, tk := range tl.Ticks {
		for _, ts := range tk.Threads {
			if ts.TID == sleeper && ts.Blocked != nil {
				read++
			}
		}
	}
	if read < 8 || time.Duration(tl.Meta.Tiers.Slow) != 300*time.Millisecond {
		t.Errorf("over 3 s: where the sleeping thread waits read on %d ticks, the slow tier every %v; want at least 8, every 300ms",
			read, time.Duration(tl.Meta.Tiers.Slow))
	}
}
