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
