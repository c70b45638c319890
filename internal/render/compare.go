// The output of gpufeed compare: nodes' platform checks side by side, the
// straggler, the first member to die, and what moved between two runs.

package render

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/compare"
)

// CompareReport is what gpufeed compare prints.
type CompareReport struct {
	// Header is set by the command that writes the report.
	Header Header
	*compare.Result
}

func (*CompareReport) document() {}

// compareRenderer is a Renderer that writes compare's report too; a format
// without it says so.
type compareRenderer interface {
	Compare(w io.Writer, r *CompareReport, o Options) error
}

// CompareExitDiffer is compare's exit status when something differs (as
// diff's): a check's status, a quantity beyond the noise, a straggler, a
// verdict. 0 when nothing does, 2 on an error.
const CompareExitDiffer = 1

// maxNamed is how many node names a line lists before "and N more".
const maxNamed = 6

func names(ls []string) string {
	if len(ls) <= maxNamed {
		return strings.Join(ls, ", ")
	}
	return strings.Join(ls[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(ls)-maxNamed)
}

func (textRenderer) Compare(w io.Writer, r *CompareReport, o Options) error {
	t := &textOut{}
	width := o.width()
	var kinds []string
	for _, in := range r.Inputs {
		kinds = append(kinds, fmt.Sprintf("%s (%s)", in.Label, in.Kind))
	}
	for _, l := range wrap("gpufeed compare: "+strings.Join(kinds, ", "), width, "", "  ", 0) {
		t.line("%s", l)
	}
	if n := r.Nodes; n != nil {
		t.line("")
		compareNodesText(t, n, o, width)
	}
	if rd := r.Runs; rd != nil {
		t.line("")
		compareRunsText(t, rd, o, width)
	}
	if len(r.Deaths) > 0 {
		t.line("")
		compareDeathsText(t, r, width)
	}
	for _, n := range r.Notes {
		for _, l := range wrap("note: "+n, width, "", "  ", 0) {
			t.line("%s", l)
		}
	}
	t.line("")
	if r.Differs {
		t.line("exit status %d: they differ", CompareExitDiffer)
	} else {
		t.line("nothing differs beyond the noise")
	}
	return t.flush(w)
}

type cellGroup struct {
	status, claim string
	labels        []string
}

// groupCells folds the nodes that say the same (status and claim) into one
// line, so a fleet of alike nodes reads as one.
func groupCells(d compare.CheckDiff, labels []string) []cellGroup {
	var gs []cellGroup
	for i, c := range d.Cells {
		st, claim := "missing", "no such result in this document"
		if c != nil {
			st, claim = c.Status, c.Claim
			if c.Subject != "" && !strings.Contains(d.ID, ":") {
				claim = c.Subject + ": " + claim
			}
		}
		found := false
		for j := range gs {
			if gs[j].status == st && gs[j].claim == claim {
				gs[j].labels = append(gs[j].labels, labels[i])
				found = true
			}
		}
		if !found {
			gs = append(gs, cellGroup{status: st, claim: claim, labels: []string{labels[i]}})
		}
	}
	return gs
}

func compareNodesText(t *textOut, n *compare.NodeDiff, o Options, width int) {
	total := len(n.Status) + len(n.Values) + n.Same
	t.line("%s", clip(fmt.Sprintf("Platform checks of %d nodes: %d of %d results differ in status, %d in measured values only, %d alike",
		len(n.Labels), len(n.Status), total, len(n.Values), n.Same), width))
	for _, d := range n.Status {
		compareDiffText(t, d, n.Labels, width)
	}
	if len(n.Status) == 0 {
		t.line("  no check's status differs between the nodes")
	}
	if o.Verbose && len(n.Values) > 0 {
		t.line("")
		t.line("Same status, different measured values:")
		for _, d := range n.Values {
			compareDiffText(t, d, n.Labels, width)
		}
	} else if len(n.Values) > 0 {
		more := fmt.Sprintf("  %d more results have the same status on every node with other values (-v lists them)", len(n.Values))
		if len(n.Values) == 1 {
			more = "  1 more result has the same status on every node with other values (-v lists it)"
		}
		t.line("%s", clip(more, width))
	}
}

func compareDiffText(t *textOut, d compare.CheckDiff, labels []string, width int) {
	head := "  " + d.ID
	if len(d.Odd) > 0 {
		head += ": " + names(d.Odd) + " differ"
		if len(d.Odd) == 1 {
			head += "s"
		}
	}
	t.line("%s", clip(head, width))
	for _, g := range groupCells(d, labels) {
		st := g.status
		if st == "fail" || st == "error" || st == "warn" {
			st = strings.ToUpper(st)
		}
		for _, l := range wrap(fmt.Sprintf("%s on %s: %s", st, names(g.labels), g.claim), width, "    ", "      ", 3) {
			t.line("%s", l)
		}
	}
}

func moveNumber(v float64, unit string) string {
	if math.IsNaN(v) {
		return "—"
	}
	return Number(v) + " " + unit
}

func compareRunsText(t *textOut, rd *compare.RunDiff, o Options, width int) {
	t.line("Runs side by side:")
	for i, run := range rd.Runs {
		line := fmt.Sprintf("  %s: pid %d (%s), %s over %d intervals", rd.Labels[i], run.PID, run.Comm, Duration(run.Duration), run.Intervals)
		if !run.Started.IsZero() {
			line += ", from " + run.Started.UTC().Format("2006-01-02 15:04:05Z")
		}
		v := run.Verdict
		if v == "" {
			v = "no verdict"
		} else {
			v = fmt.Sprintf("%s (%d %%)", v, run.Confidence)
		}
		line += "; verdict " + v
		if !run.PerInterval {
			line += "; a JSON report: percentiles only"
		}
		for _, l := range wrap(strings.TrimSpace(line), width, "  ", "    ", 0) {
			t.line("%s", l)
		}
	}
	if !rd.SameJob {
		t.line("%s", clip("  the runs observed different commands: set side by side, not one job before and after", width))
	}
	// The table: one column per run (up to what fits), then the move.
	t.line("")
	hdr := fmt.Sprintf("  %-38s", "per interval (median)")
	for _, l := range rd.Labels {
		hdr += fmt.Sprintf(" %14s", clip(l, 14))
	}
	if len(rd.Moves) > 0 {
		hdr += fmt.Sprintf("  %-22s %s", "moved", "noise (±)")
	}
	t.line("%s", hdr)
	for _, row := range rd.Rows {
		name := row.Name
		if meanOnly(row) {
			name += " (mean)"
		}
		line := fmt.Sprintf("  %-38s", clip(name, 38))
		for _, m := range row.Metrics {
			s := "—"
			if m != nil {
				v := m.P50
				if math.IsNaN(v) {
					v = m.Mean
				}
				s = moveNumber(v, shortUnit(row.Unit))
			}
			line += fmt.Sprintf(" %14s", s)
		}
		for _, mv := range rd.Moves {
			if mv.Key != row.Key {
				continue
			}
			moved := signed(mv.Delta) + " " + deltaUnit(mv.Unit)
			if !math.IsNaN(mv.Ratio) {
				moved += fmt.Sprintf(" (×%s)", Number(sig3(mv.Ratio)))
			}
			noise := "not measured"
			if mv.Measured {
				noise = Number(mv.Noise)
				switch {
				case !mv.Outside:
					noise += " inside the noise"
				case mv.Worse > 0:
					noise += " beyond it: worse"
				case mv.Worse < 0:
					noise += " beyond it: better"
				default:
					noise += " beyond it"
				}
			}
			line += fmt.Sprintf("  %-22s %s", moved, noise)
		}
		t.line("%s", line)
	}
	if o.Verbose {
		for _, row := range rd.Rows {
			for i, m := range row.Metrics {
				if m != nil {
					t.line("%s", clip(fmt.Sprintf("    %s, %s: %s; p10 %s, p90 %s over %d intervals", row.Name, rd.Labels[i], m.Of,
						moveNumber(m.P10, shortUnit(row.Unit)), moveNumber(m.P90, shortUnit(row.Unit)), m.N), width))
				}
			}
		}
	}
	if len(rd.Moves) > 0 {
		t.line("%s", clip("  noise (±): half the p10-p90 spread of the per-interval values, the larger of the two runs'", width))
	}
	t.line("")
	for _, s := range runSentences(rd) {
		for _, l := range wrap(s, width, "", "  ", 0) {
			t.line("%s", l)
		}
	}
}

func shortUnit(u string) string {
	if u == "% of a core" {
		return "%"
	}
	return u
}

func deltaUnit(u string) string {
	if strings.HasPrefix(u, "%") {
		return "points"
	}
	return u
}

func signed(v float64) string {
	if v > 0 {
		return "+" + Number(v)
	}
	return Number(v)
}

// runSentences says in words what the runs' comparison concludes.
func runSentences(rd *compare.RunDiff) []string {
	var out []string
	if len(rd.Runs) == 2 && rd.Runs[0].Verdict != rd.Runs[1].Verdict {
		out = append(out, fmt.Sprintf("The verdict changed: %s → %s.", orNone(rd.Runs[0].Verdict), orNone(rd.Runs[1].Verdict)))
	}
	var inside []string
	for _, mv := range rd.Moves {
		a, b := rd.Labels[0], rd.Labels[1]
		switch {
		case !mv.Measured:
			if mv.Key == "worker_cow_copied" {
				out = append(out, fmt.Sprintf("The forked workers' private copies of their parent's memory (copy-on-write) went from %s MiB in %s to %s MiB in %s (%s); a level at the end of each window, not a rate.",
					Number(mv.From), a, Number(mv.To), b, signed(mv.Delta)+" "+mv.Unit))
			}
			if mv.Key == "gpu_busy" {
				out = append(out, fmt.Sprintf("GPU busy moved %s %s (%s of the per-interval values), but neither input keeps the within-run spread: whether that is beyond the noise is not known (compare recordings).",
					signed(mv.Delta), deltaUnit(mv.Unit), mv.Stat))
			}
		case mv.Delta == 0:
			out = append(out, fmt.Sprintf("%s did not move (%s %s in both).", capitalise(mv.Name), Number(mv.From), shortUnit(mv.Unit)))
		case !mv.Outside:
			inside = append(inside, fmt.Sprintf("%s %s %s (±%s)", mv.Name, signed(mv.Delta), deltaUnit(mv.Unit), Number(mv.Noise)))
		case mv.Key == "gpu_busy":
			slower, faster, lo, hi := b, a, mv.To, mv.From
			if mv.Delta > 0 {
				slower, faster, lo, hi = a, b, mv.From, mv.To
			}
			s := fmt.Sprintf("%s kept its GPU busy %s %% of the time against %s's %s %% (%.1f times the within-run spread ±%s): ",
				slower, Number(lo), faster, Number(hi), math.Abs(mv.Delta)/mv.Noise, Number(mv.Noise))
			if lo > 0 {
				s += fmt.Sprintf("for the same work per step, %s's steps take about %s times as long.", slower, Number(sig3(hi/lo)))
			} else {
				s += fmt.Sprintf("%s's GPU did no work.", slower)
			}
			out = append(out, s)
		default:
			out = append(out, fmt.Sprintf("%s moved %s %s (%s → %s), %.1f times the within-run spread ±%s.", capitalise(mv.Name), signed(mv.Delta),
				deltaUnit(mv.Unit), Number(mv.From), Number(mv.To), math.Abs(mv.Delta)/mv.Noise, Number(mv.Noise)))
		}
	}
	if len(inside) > 0 {
		out = append(out, "Inside the noise, no measurable change: "+strings.Join(inside, ", ")+".")
	}
	if s := rd.Straggler; s != nil {
		line := fmt.Sprintf("Straggler: %s kept its GPU busy %s %% of the time against %s %% for the others (their median), beyond the runs' spread ±%s",
			s.Label, Number(s.Value), Number(s.Others), Number(s.Noise))
		if !math.IsNaN(s.Slowdown) {
			line += fmt.Sprintf(": for the same work per step its steps take about %s times as long", Number(sig3(s.Slowdown)))
		}
		if s.Verdict != "" {
			line += "; its verdict: " + s.Verdict
		}
		out = append(out, line+".")
		for _, c := range s.Platform {
			out = append(out, fmt.Sprintf("  its platform differs: %s, %s: %s.", c.ID, c.Status, c.Claim))
		}
	} else if rd.StragglerNote != "" && (len(rd.Runs) > 2 || rd.AcrossNodes) {
		out = append(out, capitalise(rd.StragglerNote)+".")
	}
	return out
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func deathWho(d compare.Death) string {
	s := fmt.Sprintf("pid %d (%s)", d.PID, d.Comm)
	if d.Member != "" {
		s = d.Member + ", " + s
	}
	return s
}

func compareDeathsText(t *textOut, r *CompareReport, width int) {
	f := r.First
	t.line("%s", clip(fmt.Sprintf("Members that died, across %d runs' kernel logs, oldest first:", f.Nodes), width))
	for _, d := range r.Deaths {
		line := fmt.Sprintf("  %s  %s  %s: %s", d.At.UTC().Format("15:04:05.000"), d.Label, deathWho(d), d.Cause)
		if d.Where != "" {
			line += ", " + d.Where
		}
		for _, l := range wrap(line, width, "", "      ", 2) {
			t.line("%s", l)
		}
	}
	d := f.Death
	var s string
	switch {
	case f.Next == nil:
		s = fmt.Sprintf("First to die: %s on %s (%s); no other node's log reports a death.", deathWho(d), d.Label, d.Cause)
	case f.Sure:
		s = fmt.Sprintf("First to die: %s on %s (%s), %s before the next death on another node (%s on %s): the others most likely failed because of it (if the nodes' clocks agree).",
			deathWho(d), d.Label, d.Cause, Duration(f.Gap), deathWho(*f.Next), f.Next.Label)
	default:
		s = fmt.Sprintf("The first deaths, %s on %s and %s on %s, are %s apart, within what the inputs' clocks tell (%s): which died first is not known.",
			deathWho(d), d.Label, deathWho(*f.Next), f.Next.Label, Duration(f.Gap), Duration(max(d.Resolution, f.Next.Resolution)))
	}
	for _, l := range wrap(s, width, "", "  ", 0) {
		t.line("%s", l)
	}
	if d.Line != "" {
		t.line("%s", clip("  kernel: "+d.Line, width))
	}
}

// The JSON document (docs/JSON.md, compare).

type compareDoc struct {
	Header
	Inputs     []compareInput `json:"inputs"`
	Nodes      *compareNodes  `json:"nodes"`
	Runs       *compareRuns   `json:"runs"`
	Deaths     []compareDeath `json:"deaths"`
	FirstDeath *compareFirst  `json:"first_death"`
	Notes      []string       `json:"notes"`
	Differs    bool           `json:"differs"`
}

type compareInput struct {
	File  string  `json:"file"`
	Label string  `json:"label"`
	Kind  string  `json:"kind"`
	Host  *string `json:"host"`
}

type compareNodes struct {
	Labels         []string       `json:"labels"`
	Differ         []compareCheck `json:"differ"`
	DifferInValues []compareCheck `json:"differ_in_values"`
	Same           int            `json:"same"`
}

type compareCheck struct {
	ID    string         `json:"id"`
	Check string         `json:"check"`
	Odd   []string       `json:"odd"`
	Cells []*compareCell `json:"cells"`
}

type compareCell struct {
	Label   string  `json:"label"`
	Status  string  `json:"status"`
	Subject *string `json:"subject"`
	Claim   string  `json:"claim"`
}

type compareRuns struct {
	Labels        []string          `json:"labels"`
	SameJob       bool              `json:"same_job"`
	Runs          []compareRun      `json:"runs"`
	Quantities    []compareQuantity `json:"quantities"`
	Moves         []compareMove     `json:"moves"`
	Straggler     *compareStraggler `json:"straggler"`
	StragglerNote *string           `json:"straggler_note"`
}

type compareRun struct {
	Label       string   `json:"label"`
	Started     *string  `json:"started"`
	DurationNS  int64    `json:"duration_ns"`
	Intervals   int      `json:"intervals"`
	PID         int      `json:"pid"`
	Comm        string   `json:"comm"`
	Verdict     *string  `json:"verdict"`
	Confidence  *int     `json:"confidence_percent"`
	Findings    []string `json:"findings"`
	PerInterval bool     `json:"per_interval"`
}

type compareQuantity struct {
	Key  string          `json:"key"`
	Name string          `json:"name"`
	Unit string          `json:"unit"`
	Runs []*compareStats `json:"runs"`
}

type compareStats struct {
	P10     *float64 `json:"p10"`
	P50     *float64 `json:"p50"`
	P90     *float64 `json:"p90"`
	Mean    *float64 `json:"mean"`
	Samples int      `json:"samples"`
	Of      string   `json:"of"`
}

type compareMove struct {
	Key      string   `json:"key"`
	Name     string   `json:"name"`
	Unit     string   `json:"unit"`
	Stat     string   `json:"stat"`
	From     *float64 `json:"from_value"`
	To       *float64 `json:"to_value"`
	Delta    *float64 `json:"delta_value"`
	Ratio    *float64 `json:"ratio"`
	Noise    *float64 `json:"noise_value"`
	NoiseOf  *string  `json:"noise_of"`
	Measured bool     `json:"noise_measured"`
	Outside  bool     `json:"beyond_noise"`
	Worse    int      `json:"worse"`
}

type compareStraggler struct {
	Label    string   `json:"label"`
	Key      string   `json:"key"`
	Unit     string   `json:"unit"`
	Value    float64  `json:"value"`
	Others   float64  `json:"others_median"`
	Noise    float64  `json:"noise_value"`
	Slowdown *float64 `json:"slowdown"`
	Verdict  *string  `json:"verdict"`
	Platform []string `json:"platform_differs"`
}

type compareDeath struct {
	Label        string  `json:"label"`
	At           string  `json:"at"`
	ResolutionNS int64   `json:"resolution_ns"`
	PID          int     `json:"pid"`
	Comm         string  `json:"comm"`
	Member       *string `json:"member"`
	Cause        string  `json:"cause"`
	Where        *string `json:"where"`
	Line         string  `json:"line"`
}

type compareFirst struct {
	compareDeath
	NextLabel *string `json:"next_label"`
	GapNS     *int64  `json:"gap_ns"`
	Sure      bool    `json:"order_known"`
	Runs      int     `json:"runs"`
}

func optFloat(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func deathJSON(d compare.Death) compareDeath {
	return compareDeath{Label: d.Label, At: d.At.UTC().Format(time.RFC3339Nano), ResolutionNS: int64(d.Resolution), PID: d.PID,
		Comm: d.Comm, Member: optString(d.Member), Cause: d.Cause, Where: optString(d.Where), Line: d.Line}
}

func (jsonRenderer) Compare(w io.Writer, r *CompareReport, _ Options) error {
	doc := compareDoc{Header: header(r.Header), Inputs: []compareInput{}, Deaths: []compareDeath{}, Notes: append([]string{}, r.Notes...), Differs: r.Differs}
	for _, in := range r.Inputs {
		doc.Inputs = append(doc.Inputs, compareInput{File: in.File, Label: in.Label, Kind: string(in.Kind), Host: optString(in.Host)})
	}
	checks := func(ds []compare.CheckDiff, labels []string) []compareCheck {
		out := []compareCheck{}
		for _, d := range ds {
			c := compareCheck{ID: d.ID, Check: d.Check, Odd: append([]string{}, d.Odd...)}
			for i, cell := range d.Cells {
				if cell == nil {
					c.Cells = append(c.Cells, nil)
					continue
				}
				c.Cells = append(c.Cells, &compareCell{Label: labels[i], Status: cell.Status, Subject: optString(cell.Subject), Claim: cell.Claim})
			}
			out = append(out, c)
		}
		return out
	}
	if n := r.Nodes; n != nil {
		doc.Nodes = &compareNodes{Labels: n.Labels, Differ: checks(n.Status, n.Labels), DifferInValues: checks(n.Values, n.Labels), Same: n.Same}
	}
	if rd := r.Runs; rd != nil {
		cr := &compareRuns{Labels: rd.Labels, SameJob: rd.SameJob, Runs: []compareRun{}, Quantities: []compareQuantity{}, Moves: []compareMove{},
			StragglerNote: optString(rd.StragglerNote)}
		for i, run := range rd.Runs {
			j := compareRun{Label: rd.Labels[i], DurationNS: int64(run.Duration), Intervals: run.Intervals, PID: run.PID, Comm: run.Comm,
				Verdict: optString(run.Verdict), Findings: append([]string{}, run.Findings...), PerInterval: run.PerInterval}
			if !run.Started.IsZero() {
				s := run.Started.UTC().Format(time.RFC3339Nano)
				j.Started = &s
			}
			if run.Verdict != "" {
				c := run.Confidence
				j.Confidence = &c
			}
			cr.Runs = append(cr.Runs, j)
		}
		for _, row := range rd.Rows {
			q := compareQuantity{Key: row.Key, Name: row.Name, Unit: row.Unit}
			for _, m := range row.Metrics {
				if m == nil {
					q.Runs = append(q.Runs, nil)
					continue
				}
				q.Runs = append(q.Runs, &compareStats{P10: optFloat(m.P10), P50: optFloat(m.P50), P90: optFloat(m.P90), Mean: optFloat(m.Mean), Samples: m.N, Of: m.Of})
			}
			cr.Quantities = append(cr.Quantities, q)
		}
		for _, mv := range rd.Moves {
			cr.Moves = append(cr.Moves, compareMove{Key: mv.Key, Name: mv.Name, Unit: mv.Unit, Stat: mv.Stat, From: optFloat(mv.From), To: optFloat(mv.To),
				Delta: optFloat(mv.Delta), Ratio: optFloat(mv.Ratio), Noise: optFloat(mv.Noise), NoiseOf: optString(mv.NoiseOf),
				Measured: mv.Measured, Outside: mv.Outside, Worse: mv.Worse})
		}
		if s := rd.Straggler; s != nil {
			js := &compareStraggler{Label: s.Label, Key: s.Key, Unit: s.Unit, Value: s.Value, Others: s.Others, Noise: s.Noise,
				Slowdown: optFloat(s.Slowdown), Verdict: optString(s.Verdict), Platform: []string{}}
			for _, c := range s.Platform {
				js.Platform = append(js.Platform, c.ID)
			}
			cr.Straggler = js
		}
		doc.Runs = cr
	}
	for _, d := range r.Deaths {
		doc.Deaths = append(doc.Deaths, deathJSON(d))
	}
	if f := r.First; f != nil {
		jf := &compareFirst{compareDeath: deathJSON(f.Death), Sure: f.Sure, Runs: f.Nodes}
		if f.Next != nil {
			l, g := f.Next.Label, int64(f.Gap)
			jf.NextLabel, jf.GapNS = &l, &g
		}
		doc.FirstDeath = jf
	}
	return writeJSON(w, doc)
}

// meanOnly: no run keeps this quantity's median (a JSON report keeps the
// mean of the run-queue wait).
func meanOnly(row compare.Row) bool {
	for _, m := range row.Metrics {
		if m != nil && !math.IsNaN(m.P50) {
			return false
		}
	}
	return true
}
