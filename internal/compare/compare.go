package compare

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Result is what compare concludes.
type Result struct {
	Inputs []*Input
	// Nodes compares the check documents (nil with fewer than two).
	Nodes *NodeDiff
	// Runs compares the runs: recordings and diagnose reports (nil with
	// fewer than two).
	Runs *RunDiff
	// Deaths are the members that died, across every run's kernel log,
	// oldest first; First says which died first and how surely.
	Deaths []Death
	First  *FirstDeath
	// Notes say what the comparison rests on or could not use.
	Notes []string
	// Differs is true when something differs: a check's status, a quantity
	// outside the noise, a straggler, a verdict.
	Differs bool
}

// NodeDiff is the nodes' platform checks side by side.
type NodeDiff struct {
	Labels []string
	// Status are the results whose status differs between the nodes (or
	// that some nodes lack), the worst first; Values those with the same
	// status on every node whose claim (the measured facts) differs.
	Status []CheckDiff
	Values []CheckDiff
	// Same counts the results alike on every node.
	Same int
}

// CheckDiff is one check result across the nodes.
type CheckDiff struct {
	ID    string
	Check string
	// Cells are one per node, in Labels' order; a nil cell is a node whose
	// document has no such result.
	Cells []*CheckResult
	// Odd are the labels of the nodes that differ from the others: the
	// nodes with the worst status, or those whose claim the fewest share.
	Odd []string
}

// RunDiff is the runs side by side.
type RunDiff struct {
	Labels []string
	Runs   []*Run
	// Rows are the quantities every run measured, in a fixed order.
	Rows []Row
	// Moves are what moved from the first run to the second (two runs
	// only): the before and after of a change.
	Moves []Move
	// Straggler is the run that kept its GPU busy the least, when it stands
	// out of the others beyond the noise; nil otherwise (see StragglerNote).
	Straggler     *Straggler
	StragglerNote string
	// SameJob is false when the runs observed different commands.
	SameJob bool
	// AcrossNodes is true when every run names its own host: nodes of one
	// job, not one node before and after a change.
	AcrossNodes bool
}

// Row is one quantity in every run.
type Row struct {
	Key, Name, Unit string
	// Metrics are in the runs' order (nil where a run lacks it).
	Metrics []*Metric
}

// Move is what one quantity did from the first run to the second.
type Move struct {
	Key, Name, Unit string
	// Stat is what is compared: "median" of the per-interval values, or
	// "mean" when an input keeps no median of it.
	Stat     string
	From, To float64
	Delta    float64
	// Ratio is To/From; NaN when From is 0.
	Ratio float64
	// Noise is the within-run spread: half the width of the middle 80 % of
	// the per-interval values (p10 to p90), the larger of the two runs';
	// NaN when neither input keeps that spread. NoiseOf says whose.
	Noise   float64
	NoiseOf string
	// Outside says the move is larger than the noise; Measured that the
	// noise could be measured at all (else nothing is claimed).
	Outside  bool
	Measured bool
	// Worse is +1 when the second run is worse by this quantity, -1 when
	// better, 0 when the quantity has no better direction or did not move
	// beyond the noise.
	Worse int
}

// Straggler is the run whose GPU was busy the least.
type Straggler struct {
	Label string
	// Key names the quantity it stands out by (gpu_busy).
	Key, Name, Unit string
	Value           float64
	// Others is the median of the other runs' values.
	Others float64
	Noise  float64
	// Slowdown is Others/Value: at the same work per step, how many times
	// as long its steps take.
	Slowdown float64
	Verdict  string
	// Platform are the checks whose status differs on the straggler's node
	// when check documents of the same nodes were given.
	Platform []CheckResult
}

// FirstDeath says which member died first across the nodes.
type FirstDeath struct {
	Death Death
	// Next is the next death on another node, when there is one; Gap the
	// time between them.
	Next *Death
	Gap  time.Duration
	// Sure is false when the gap is within what the clocks can tell (the
	// inputs' time resolution): the order is then not known.
	Sure bool
	// Nodes is how many nodes' logs were read.
	Nodes int
}

// minIntervals is the least number of intervals a run needs for its
// within-run spread to mean anything: with fewer, p10 and p90 are the
// extremes of a handful of values.
const minIntervals = 10

// Compare sets the inputs side by side. Inputs keep their order.
func Compare(inputs []*Input) *Result {
	r := &Result{Inputs: inputs}
	label(inputs)
	var checks, runs []*Input
	for _, in := range inputs {
		switch {
		case in.Check != nil:
			checks = append(checks, in)
		case in.Run != nil:
			runs = append(runs, in)
		}
		r.Notes = append(r.Notes, in.Warnings...)
	}
	if len(checks) == 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("one check document (%s): nothing to set it beside", checks[0].Label))
	}
	if len(runs) == 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("one run (%s): nothing to set it beside", runs[0].Label))
	}
	if len(checks) >= 2 {
		r.Nodes = compareChecks(checks)
		if len(r.Nodes.Status) > 0 {
			r.Differs = true
		}
	}
	if len(runs) >= 2 {
		r.Runs = compareRuns(runs)
		for _, m := range r.Runs.Moves {
			if m.Outside {
				r.Differs = true
			}
		}
		if r.Runs.Straggler != nil {
			r.Differs = true
			if r.Nodes != nil {
				for _, d := range r.Nodes.Status {
					if i := slices.Index(r.Nodes.Labels, r.Runs.Straggler.Label); i >= 0 && d.Cells[i] != nil && slices.Contains(d.Odd, r.Runs.Straggler.Label) {
						r.Runs.Straggler.Platform = append(r.Runs.Straggler.Platform, *d.Cells[i])
					}
				}
			}
		}
		for i := 1; i < len(r.Runs.Runs); i++ {
			if r.Runs.Runs[i].Verdict != r.Runs.Runs[0].Verdict {
				r.Differs = true
			}
		}
	}
	for _, in := range runs {
		for _, d := range in.Run.Deaths {
			d.Label = in.Label
			r.Deaths = append(r.Deaths, d)
		}
	}
	sort.SliceStable(r.Deaths, func(i, j int) bool { return r.Deaths[i].At.Before(r.Deaths[j].At) })
	if len(r.Deaths) > 0 {
		r.First = firstDeath(r.Deaths, len(runs))
	}
	return r
}

// label names every input: its host when each host is named once, else the
// file's base name without its extension (made unique).
func label(inputs []*Input) {
	hosts := map[string]int{}
	for _, in := range inputs {
		hosts[in.Host+"\x00"+string(kindGroup(in.Kind))]++
	}
	used := map[string]int{}
	for _, in := range inputs {
		l := in.Host
		if l == "" || hosts[in.Host+"\x00"+string(kindGroup(in.Kind))] > 1 {
			base := filepath.Base(in.File)
			l = strings.TrimSuffix(base, filepath.Ext(base))
		}
		used[l]++
		if used[l] > 1 {
			l = fmt.Sprintf("%s#%d", l, used[l])
		}
		in.Label = l
	}
}

// kindGroup: a node's check and its run may share a host name.
func kindGroup(k Kind) Kind {
	if k == KindCheck {
		return KindCheck
	}
	return KindRecording
}

var statusRank = map[string]int{"fail": 5, "error": 4, "warn": 3, "not-visible": 2, "absent": 1, "ok": 0}

func compareChecks(checks []*Input) *NodeDiff {
	nd := &NodeDiff{}
	var ids []string
	byNode := make([]map[string]*CheckResult, len(checks))
	for i, in := range checks {
		nd.Labels = append(nd.Labels, in.Label)
		byNode[i] = map[string]*CheckResult{}
		for j := range in.Check.Results {
			res := &in.Check.Results[j]
			if _, ok := byNode[i][res.ID]; !ok && !slices.Contains(ids, res.ID) {
				ids = append(ids, res.ID)
			}
			byNode[i][res.ID] = res
		}
	}
	for _, id := range ids {
		d := CheckDiff{ID: id}
		statuses, claims := map[string]int{}, map[string]int{}
		missing := false
		for i := range checks {
			c := byNode[i][id]
			d.Cells = append(d.Cells, c)
			if c == nil {
				missing = true
				continue
			}
			d.Check = c.Check
			statuses[c.Status]++
			claims[c.Claim]++
		}
		switch {
		case len(statuses) > 1 || missing:
			worst := -1
			for s := range statuses {
				worst = max(worst, statusRank[s])
			}
			for i, c := range d.Cells {
				if c == nil || statusRank[c.Status] == worst && worst > 0 {
					d.Odd = append(d.Odd, nd.Labels[i])
				}
			}
			nd.Status = append(nd.Status, d)
		case len(claims) > 1:
			fewest := len(checks)
			for _, n := range claims {
				fewest = min(fewest, n)
			}
			for i, c := range d.Cells {
				if claims[c.Claim] == fewest && fewest < len(checks)-fewest {
					d.Odd = append(d.Odd, nd.Labels[i])
				}
			}
			nd.Values = append(nd.Values, d)
		default:
			nd.Same++
		}
	}
	worst := func(d CheckDiff) int {
		w := 0
		for _, c := range d.Cells {
			if c != nil {
				w = max(w, statusRank[c.Status])
			}
		}
		return w
	}
	sort.SliceStable(nd.Status, func(i, j int) bool { return worst(nd.Status[i]) > worst(nd.Status[j]) })
	return nd
}

// rowOrder is the order quantities are shown in: what the GPU did first.
var rowOrder = []string{"gpu_busy", "launch_cpu", "launch_wait", "job_cpu", "host_busy", "worker_cow_copied"}

func compareRuns(ins []*Input) *RunDiff {
	rd := &RunDiff{SameJob: true}
	for _, in := range ins {
		rd.Labels = append(rd.Labels, in.Label)
		rd.Runs = append(rd.Runs, in.Run)
		if in.Run.Comm != ins[0].Run.Comm {
			rd.SameJob = false
		}
	}
	for _, key := range rowOrder {
		row := Row{Key: key}
		for _, run := range rd.Runs {
			var m *Metric
			for _, x := range run.Metrics {
				if x.Key == key {
					m = x
				}
			}
			if m != nil {
				row.Name, row.Unit = m.Name, m.Unit
			}
			row.Metrics = append(row.Metrics, m)
		}
		if row.Name != "" {
			rd.Rows = append(rd.Rows, row)
		}
	}
	if len(rd.Runs) == 2 {
		for _, row := range rd.Rows {
			if row.Metrics[0] != nil && row.Metrics[1] != nil {
				rd.Moves = append(rd.Moves, move(row, rd.Labels))
			}
		}
	}
	hosts := map[string]bool{}
	for _, in := range ins {
		if in.Host != "" {
			hosts[in.Host] = true
		}
	}
	rd.AcrossNodes = len(hosts) == len(ins)
	// A straggler is one among nodes (or among several runs); two runs on
	// one host are a before and after, said by the moves.
	if rd.AcrossNodes || len(ins) > 2 {
		rd.Straggler, rd.StragglerNote = straggler(rd)
	}
	return rd
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// spread is half the width of a run's middle 80 %: NaN when the input does
// not keep it or measured too few intervals for it to mean anything.
func spread(m *Metric) float64 {
	if !finite(m.P10) || !finite(m.P90) || m.N < minIntervals {
		return math.NaN()
	}
	return (m.P90 - m.P10) / 2
}

func move(row Row, labels []string) Move {
	a, b := row.Metrics[0], row.Metrics[1]
	mv := Move{Key: row.Key, Name: row.Name, Unit: row.Unit, Stat: "median", From: a.P50, To: b.P50}
	if !finite(a.P50) || !finite(b.P50) {
		mv.Stat, mv.From, mv.To = "mean", a.Mean, b.Mean
	}
	mv.Delta = mv.To - mv.From
	mv.Ratio = math.NaN()
	if mv.From != 0 {
		mv.Ratio = mv.To / mv.From
	}
	sa, sb := spread(a), spread(b)
	switch {
	case finite(sa) && finite(sb):
		mv.Noise = max(sa, sb)
		mv.NoiseOf = "both runs"
	case finite(sa):
		mv.Noise, mv.NoiseOf = sa, labels[0]
	case finite(sb):
		mv.Noise, mv.NoiseOf = sb, labels[1]
	default:
		mv.Noise = math.NaN()
	}
	if !finite(mv.Delta) {
		return mv
	}
	mv.Measured = finite(mv.Noise)
	mv.Outside = mv.Measured && math.Abs(mv.Delta) > mv.Noise
	if mv.Outside && row.Metrics[0] != nil {
		switch better := a.Better; {
		case better > 0 && mv.Delta < 0, better < 0 && mv.Delta > 0:
			mv.Worse = +1
		case better != 0:
			mv.Worse = -1
		}
	}
	return mv
}

// straggler finds the run whose GPU was busy the least, and says it is the
// straggler only when it sits below the others' median by more than the
// noise.
func straggler(rd *RunDiff) (*Straggler, string) {
	var row *Row
	for i := range rd.Rows {
		if rd.Rows[i].Key == "gpu_busy" {
			row = &rd.Rows[i]
		}
	}
	if row == nil {
		return nil, "no run measured its GPU's utilisation: no straggler can be named"
	}
	lo := -1
	var vals []float64
	for i, m := range row.Metrics {
		if m == nil || !finite(m.P50) {
			continue
		}
		vals = append(vals, m.P50)
		if lo < 0 || m.P50 < row.Metrics[lo].P50 {
			lo = i
		}
	}
	if len(vals) < 2 {
		return nil, "fewer than two runs measured their GPU's utilisation"
	}
	var others []float64
	noise := math.NaN()
	for i, m := range row.Metrics {
		if m == nil || !finite(m.P50) {
			continue
		}
		if i != lo {
			others = append(others, m.P50)
		}
		if s := spread(m); finite(s) && (!finite(noise) || s > noise) {
			noise = s
		}
	}
	slices.Sort(others)
	med := others[(len(others)-1)/2]
	if len(others)%2 == 0 {
		med = (others[len(others)/2-1] + others[len(others)/2]) / 2
	}
	m := row.Metrics[lo]
	if !finite(noise) {
		return nil, fmt.Sprintf("%s kept its GPU busy the least (%.1f %% against %.1f %%), but no input measured the within-run spread: not named a straggler", rd.Labels[lo], m.P50, med)
	}
	if med-m.P50 <= noise {
		return nil, fmt.Sprintf("no straggler: the GPUs' busy shares differ by %.1f points at most, within the runs' spread (±%.1f)", med-m.P50, noise)
	}
	s := &Straggler{Label: rd.Labels[lo], Key: row.Key, Name: row.Name, Unit: row.Unit, Value: m.P50, Others: med, Noise: noise,
		Verdict: rd.Runs[lo].Verdict, Slowdown: math.NaN()}
	if m.P50 > 0 {
		s.Slowdown = med / m.P50
	}
	return s, ""
}

func firstDeath(ds []Death, nodes int) *FirstDeath {
	f := &FirstDeath{Death: ds[0], Nodes: nodes, Sure: true}
	for i := 1; i < len(ds); i++ {
		if ds[i].Label != ds[0].Label {
			next := ds[i]
			f.Next = &next
			f.Gap = ds[i].At.Sub(ds[0].At)
			f.Sure = f.Gap > max(ds[0].Resolution, ds[i].Resolution)
			break
		}
	}
	return f
}
