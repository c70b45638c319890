package tracejudge_test

import (
	"bytes"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/tracegen"
)

// TestStraggler generates four ranks running identical steps ending in an
// all-reduce; rank 2 starts every step 3 ms late. It must be the one
// straggler, found from collective durations (no clock alignment needed).
func TestStraggler(t *testing.T) {
	const late, delay = 2, int64(3_000_000)
	var sums []tracejudge.RankSummary
	for rank := range 4 {
		cfg := tracegen.Config{Pattern: tracegen.Healthy, Steps: 6, Seed: 7, Rank: rank, WorldSize: 4,
			AllReduceNs: 1_000_000, SlowestDelayNs: delay}
		if rank == late {
			cfg.StepDelayNs = delay
		}
		var buf bytes.Buffer
		if _, err := tracegen.Generate(&buf, cfg); err != nil {
			t.Fatal(err)
		}
		tr, err := kineto.Decode(&buf, "rank.json", kineto.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := tracejudge.Analyze(tr, tracejudge.Options{})
		sums = append(sums, tracejudge.Summarize(r, tr))
	}
	m := tracejudge.CompareRanks(sums)
	if len(m.Stragglers) != 1 || m.Stragglers[0].Rank != late {
		t.Fatalf("stragglers = %+v, want rank %d alone", m.Stragglers, late)
	}
	s := m.Stragglers[0]
	if s.MedianArrivalLagNs < delay-100_000 || s.MedianArrivalLagNs > delay+100_000 {
		t.Errorf("arrival lag = %d ns, want about %d", s.MedianArrivalLagNs, delay)
	}
	if s.LateCollectives != s.Collectives {
		t.Errorf("late in %d of %d collectives, want all", s.LateCollectives, s.Collectives)
	}
	if len(m.Findings) != 1 || m.Findings[0].ID != "straggler-rank" {
		t.Errorf("findings = %+v", m.Findings)
	}
	// Without the late rank, nobody straggles.
	m = tracejudge.CompareRanks(append(sums[:late:late], sums[late+1:]...))
	if len(m.Stragglers) != 0 {
		t.Errorf("stragglers among on-time ranks: %+v", m.Stragglers)
	}
}

// TestStragglerByStepStart: without collectives, a rank whose steps start
// late is found from step starts.
func TestStragglerByStepStart(t *testing.T) {
	mk := func(rank int, offset int64) tracejudge.RankSummary {
		var steps []tracestats.StepSummary
		for i := range 5 {
			steps = append(steps, tracestats.StepSummary{Number: i, StartNs: int64(i)*100e6 + offset, DurNs: 100e6})
		}
		return tracejudge.NewRankSummary(rank, "r.json", steps)
	}
	m := tracejudge.CompareRanks([]tracejudge.RankSummary{mk(0, 0), mk(1, 20e6), mk(2, 1e6)})
	if len(m.Stragglers) != 1 || m.Stragglers[0].Rank != 1 || !m.Stragglers[0].ByStepStart {
		t.Fatalf("stragglers = %+v, want rank 1 by step start", m.Stragglers)
	}
}
