package sample

import (
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// With room in the job's budget for one more memory reading, the process
// held back longest takes it, whatever its pid: a low pid due again does
// not go before a high one held since earlier. Without room nobody reads,
// and each process held back is counted once.
func TestRollupHeldLongestGoesFirst(t *testing.T) {
	low := &trackedProc{pid: 10, nextRollup: 3 * time.Second}
	high := &trackedProc{pid: 20, nextRollup: time.Second, rollupHeld: true}
	s := &Sampler{tl: &timeline.Timeline{}, procs: map[int]*trackedProc{10: low, 20: high}}
	s.cfg.RollupJobBudget = 0.03
	now := int64(4 * time.Second) // room for 120 ms
	s.rollupSpent = 100 * time.Millisecond
	if s.rollupAllowed(low, now) {
		t.Error("pid 10, due at 3 s, read before pid 20, held back since 1 s")
	}
	if !s.rollupAllowed(high, now) {
		t.Error("pid 20, held back longest, not read with room in the budget")
	}
	if !low.rollupHeld || s.tl.Counts.RollupSkipped != 1 {
		t.Errorf("pid 10 held %v, %d counted; want held and counted once", low.rollupHeld, s.tl.Counts.RollupSkipped)
	}
	high.rollupHeld = false // read
	if !s.rollupAllowed(low, now) {
		t.Error("pid 10 not read once pid 20 was")
	}
	s.rollupSpent = 200 * time.Millisecond // no room
	low.rollupHeld = false
	for range 3 {
		if s.rollupAllowed(low, now) || s.rollupAllowed(high, now) {
			t.Fatal("a reading taken past the job's budget")
		}
	}
	if s.tl.Counts.RollupSkipped != 3 {
		t.Errorf("%d held back counted, want 3 (one per process held, once each)", s.tl.Counts.RollupSkipped)
	}
	// A process's first reading is taken whatever the budget.
	if !s.rollupAllowed(&trackedProc{pid: 30}, now) {
		t.Error("a new process's first reading held back")
	}
}
