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

// The ticks' phase sweep: successive ticks interval ± interval/10 apart,
// interval apart on average over a sweep, the last on the window's end and
// none past it; and over 20 ticks, the ticks' phases within a period equal
// to the interval (the CPU limit's 100 ms period, for one) spread over the
// whole period, a tenth of it apart (the sweep passes each twice), instead
// of one point of it.
func TestTicksSweepThePhaseOfTheInterval(t *testing.T) {
	const iv = 100 * time.Millisecond
	const window = 10 * time.Second
	prev := time.Duration(0)
	var phases []time.Duration
	for slot := int64(1); ; slot++ {
		at := slotTime(slot, iv, window)
		gap := at - prev
		if at > window {
			t.Fatalf("slot %d at %v, past the %v window", slot, at, window)
		}
		if at == window {
			break
		}
		if gap < iv-iv/10 || gap > iv+iv/10 {
			t.Errorf("slot %d: %v after the one before, want %v ± %v", slot, gap, iv, iv/10)
		}
		if slot <= 4*sweepQuarter {
			phases = append(phases, at%iv)
		}
		if slot%(4*sweepQuarter) == 0 && at != time.Duration(slot)*iv {
			t.Errorf("slot %d at %v: a whole sweep should end on the grid (%v)", slot, at, time.Duration(slot)*iv)
		}
		prev = at
	}
	// Ten phases a tenth of the period apart, over nearly the whole of it.
	lo, hi := iv, time.Duration(0)
	seen := map[time.Duration]bool{}
	for _, p := range phases {
		lo, hi = min(lo, p), max(hi, p)
		seen[p] = true
	}
	if len(seen) < 2*sweepQuarter || hi-lo < iv*8/10 {
		t.Errorf("20 ticks' phases within the %v period: %d distinct, from %v to %v; want 10 over most of it", iv, len(seen), lo, hi)
	}
	if got := slotTime(int64(window/iv)+3, iv, window); got != window {
		t.Errorf("a slot past the window falls at %v, want the window's end %v", got, window)
	}
}
