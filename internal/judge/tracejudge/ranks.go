package tracejudge

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// RankSummary is what the cross-rank comparison keeps of one rank once its
// trace is released: the verdict, the shares, step times and collectives.
type RankSummary struct {
	Rank    int             `json:"rank"`
	Source  string          `json:"source"`
	Verdict finding.Verdict `json:"verdict"`
	Shares  Shares          `json:"shares"`
	// StepMedianNs is the median step duration, 0 without steps.
	StepMedianNs int64 `json:"step_median_ns"`
	steps        []tracestats.StepSummary
	collectives  []collective
}

// collective is one communication kernel: the step it belongs to (by the
// CPU step that launched it), its order among the step's collectives on
// its stream, and its timing.
type collective struct {
	step    int
	stream  int64
	ordinal int
	name    trace.NameID
	start   int64
	dur     int64
}

// NewRankSummary builds a summary from step times alone (no collectives):
// for ranks known only by their steps, and for tests.
func NewRankSummary(rank int, source string, steps []tracestats.StepSummary) RankSummary {
	rs := RankSummary{Rank: rank, Source: source, steps: steps}
	if len(steps) > 0 {
		d := make([]int64, len(steps))
		for i, s := range steps {
			d[i] = s.DurNs
		}
		slices.Sort(d)
		rs.StepMedianNs = d[len(d)/2]
	}
	return rs
}

// Summarize keeps the cross-rank facts of a report and its trace.
func Summarize(r *RankReport, t *trace.Trace) RankSummary {
	rs := NewRankSummary(r.Rank, r.Source, r.Steps)
	rs.Verdict, rs.Shares = r.Verdict, r.Shares
	// Collectives, assigned to the step their launch call falls in.
	steps := make([]tracestats.Step, len(r.Steps))
	for i, s := range r.Steps {
		steps[i] = tracestats.Step{Number: s.Number, Start: s.StartNs, End: s.StartNs + s.DurNs}
	}
	ord := map[[2]int64]int{}
	for i := range t.GPU {
		g := &t.GPU[i]
		if g.Kind != trace.Kernel || g.Launch < 0 || !tracestats.IsCollective(t.Name(g.Name)) {
			continue
		}
		pos := tracestats.StepAt(steps, t.Runtime[g.Launch].Start)
		if pos < 0 {
			continue
		}
		st := t.Streams[g.Stream].ID
		key := [2]int64{int64(pos), st}
		rs.collectives = append(rs.collectives, collective{step: steps[pos].Number, stream: st, ordinal: ord[key], name: g.Name, start: g.Start, dur: g.Dur()})
		ord[key]++
	}
	return rs
}

// Straggler is a rank that arrives late.
type Straggler struct {
	Rank int `json:"rank"`
	// LateCollectives is how many collectives this rank entered last, of Collectives compared.
	LateCollectives int `json:"late_collectives"`
	Collectives     int `json:"collectives"`
	// MedianArrivalLagNs is the median, over compared collectives, of how
	// much later this rank entered than the first rank (from durations:
	// a blocking collective ends together on every rank, so the rank that
	// arrives last runs it shortest; no clock alignment needed).
	MedianArrivalLagNs int64 `json:"median_arrival_lag_ns"`
	// MedianStepStartLagNs is the median lag of this rank's step starts
	// behind the earliest rank (needs clocks aligned across hosts).
	MedianStepStartLagNs int64 `json:"median_step_start_lag_ns"`
	// LateSteps is how many of Steps compared this rank started last.
	LateSteps int `json:"late_steps"`
	Steps     int `json:"steps"`
	// ByStepStart: no collectives could be compared, so the rank was found
	// from step starts alone (which assume the hosts' clocks agree).
	ByStepStart bool `json:"by_step_start,omitempty"`
}

// MultiRank compares ranks.
type MultiRank struct {
	Ranks      []RankSummary     `json:"ranks"`
	Stragglers []Straggler       `json:"stragglers,omitempty"`
	Findings   []finding.Finding `json:"findings,omitempty"`
}

// CompareRanks builds the per-rank table and finds stragglers.
func CompareRanks(ranks []RankSummary) MultiRank {
	m := MultiRank{Ranks: ranks}
	slices.SortFunc(m.Ranks, func(a, b RankSummary) int { return cmp.Compare(a.Rank, b.Rank) })
	if len(ranks) < 2 {
		return m
	}
	// Collective durations per (step, stream, ordinal) and rank.
	type entry struct {
		rank int
		dur  int64
	}
	byKey := map[string][]entry{}
	for ri, r := range m.Ranks {
		for _, c := range r.collectives {
			k := fmt.Sprintf("%d/%d/%d", c.step, c.stream, c.ordinal)
			byKey[k] = append(byKey[k], entry{ri, c.dur})
		}
	}
	lags := make([][]int64, len(m.Ranks))
	late := make([]int, len(m.Ranks))
	compared := make([]int, len(m.Ranks))
	for _, es := range byKey {
		if len(es) < 2 {
			continue
		}
		longest := es[0].dur
		lastRank, shortest := es[0].rank, es[0].dur
		for _, e := range es {
			longest = max(longest, e.dur)
			if e.dur < shortest {
				lastRank, shortest = e.rank, e.dur
			}
		}
		for _, e := range es {
			lags[e.rank] = append(lags[e.rank], longest-e.dur)
			compared[e.rank]++
		}
		late[lastRank]++
	}
	// Step start lag per step number.
	stepLags := make([][]int64, len(m.Ranks))
	starts := map[int][]entry{}
	for ri, r := range m.Ranks {
		for _, s := range r.steps {
			starts[s.Number] = append(starts[s.Number], entry{ri, s.StartNs})
		}
	}
	lateSteps := make([]int, len(m.Ranks))
	for _, es := range starts {
		if len(es) < 2 {
			continue
		}
		first, last, lastRank := es[0].dur, es[0].dur, es[0].rank
		for _, e := range es {
			first = min(first, e.dur)
			if e.dur > last {
				last, lastRank = e.dur, e.rank
			}
		}
		for _, e := range es {
			stepLags[e.rank] = append(stepLags[e.rank], e.dur-first)
		}
		lateSteps[lastRank]++
	}
	var stepMed []int64
	for _, r := range m.Ranks {
		if r.StepMedianNs > 0 {
			stepMed = append(stepMed, r.StepMedianNs)
		}
	}
	slices.Sort(stepMed)
	var threshold int64
	if len(stepMed) > 0 {
		threshold = int64(float64(stepMed[len(stepMed)/2]) * thresholds.StragglerLagPct / 100)
	}
	anyCollectives := false
	for ri := range m.Ranks {
		anyCollectives = anyCollectives || compared[ri] > 0
	}
	for ri, r := range m.Ranks {
		s := Straggler{Rank: r.Rank, LateCollectives: late[ri], Collectives: compared[ri],
			MedianArrivalLagNs: median64(lags[ri]), MedianStepStartLagNs: median64(stepLags[ri]), LateSteps: lateSteps[ri], Steps: len(stepLags[ri])}
		switch {
		case threshold <= 0:
		case anyCollectives:
			if compared[ri] > 0 && s.MedianArrivalLagNs >= threshold && 2*s.LateCollectives >= s.Collectives {
				m.Stragglers = append(m.Stragglers, s)
			}
		case s.Steps > 0 && s.MedianStepStartLagNs >= threshold && 2*s.LateSteps >= s.Steps:
			// No collectives to compare: fall back on step starts, which
			// assume the hosts' clocks agree.
			s.ByStepStart = true
			m.Stragglers = append(m.Stragglers, s)
		}
	}
	for _, s := range m.Stragglers {
		src := filepath.Base(m.Ranks[slices.IndexFunc(m.Ranks, func(r RankSummary) bool { return r.Rank == s.Rank })].Source)
		if s.ByStepStart {
			m.Findings = append(m.Findings, finding.Finding{
				ID:       StragglerID,
				Severity: finding.Warning,
				Subject:  fmt.Sprintf("rank %d", s.Rank),
				Claim: fmt.Sprintf("Rank %d starts its steps late: last in %d of %d steps, a median %.2f ms after the first rank (no collectives to compare; this assumes the hosts' clocks agree).",
					s.Rank, s.LateSteps, s.Steps, float64(s.MedianStepStartLagNs)/1e6),
				Evidence: []finding.Evidence{
					{What: "steps started last", Value: float64(s.LateSteps), Window: fmt.Sprintf("%d steps compared across %d ranks", s.Steps, len(m.Ranks)), Source: src + ": ProfilerStep#N"},
					{What: "median step start lag behind the earliest rank", Value: float64(s.MedianStepStartLagNs) / 1e3, Unit: "us", Window: "per ProfilerStep (assumes aligned host clocks)", Source: src + ": ProfilerStep#N"},
				},
				Decision: fmt.Sprintf("Check that the hosts' clocks agree (chrony/NTP); if they do, find what delays rank %d between steps: its own verdict (%s) says what it waits for.", s.Rank, r0class(m.Ranks, s.Rank)),
				// Sources: 004 NCCL hangs
			})
			continue
		}
		m.Findings = append(m.Findings, finding.Finding{
			ID:       StragglerID,
			Severity: finding.Warning,
			Subject:  fmt.Sprintf("rank %d", s.Rank),
			Claim: fmt.Sprintf("Rank %d enters collectives late: last in %d of %d, a median %.2f ms after the first rank; every other rank waits for it.",
				s.Rank, s.LateCollectives, s.Collectives, float64(s.MedianArrivalLagNs)/1e6),
			Evidence: []finding.Evidence{
				{What: "collectives entered last", Value: float64(s.LateCollectives), Window: fmt.Sprintf("%d collectives compared across %d ranks", s.Collectives, len(m.Ranks)), Source: src + ": nccl kernels"},
				{What: "median arrival lag behind the first rank", Value: float64(s.MedianArrivalLagNs) / 1e3, Unit: "us", Window: "per collective, from kernel durations", Source: src + ": nccl kernels"},
				{What: "median step start lag behind the earliest rank", Value: float64(s.MedianStepStartLagNs) / 1e3, Unit: "us", Window: "per ProfilerStep (assumes aligned host clocks)", Source: src + ": ProfilerStep#N"},
			},
			Decision: fmt.Sprintf("Find what slows rank %d before its collectives: its own verdict (%s) says what it waits for; check its host (gpufeed diagnose there) for a slower input pipeline, a throttled GPU or a noisy neighbour.", s.Rank, r0class(m.Ranks, s.Rank)),
			// Sources: 004 NCCL hangs
		})
	}
	return m
}

func r0class(ranks []RankSummary, rank int) finding.Class {
	for _, r := range ranks {
		if r.Rank == rank {
			return r.Verdict.Class
		}
	}
	return finding.Inconclusive
}

func median64(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
