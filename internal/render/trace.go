// The output of gpufeed trace: trace analysis reports as text for people
// and JSON for programs. It computes nothing: every number comes from the
// reports.

package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/safetext"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// TraceResult is everything `gpufeed trace` reports: one report per rank and,
// with several ranks, their comparison.
type TraceResult struct {
	Reports []*tracejudge.RankReport `json:"reports"`
	Multi   *tracejudge.MultiRank    `json:"multi_rank,omitempty"`
	// Skipped are the files named (or found in a directory) that were not
	// read, each with the reason.
	Skipped []TraceSkipped `json:"skipped,omitempty"`
}

// TraceSkipped is a file that was not read and why.
type TraceSkipped struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// TraceJSON writes the result as indented JSON.
// Bidirectional controls in names are escaped (safetext.EscapeJSON), which
// leaves every value as it was.
func TraceJSON(w io.Writer, res TraceResult) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	_, err := w.Write(safetext.EscapeJSON(buf.Bytes()))
	return err
}

// clean makes attacker-controlled text (kernel, operator and thread names
// from a trace file) safe for a terminal: control characters, line
// separators and bidirectional controls become '?' (safetext.Clean).

// short trims a long name (C++ kernel signatures) for tables.
func short(s string, n int) string {
	s = Clean(s)
	if len([]rune(s)) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func nsToMS(ns int64) float64 { return float64(ns) / 1e6 }

func sharePct(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// TraceText writes the human report: for each rank the verdict and its evidence
// first, then the decision, the other findings, and the HTA-style and
// Nsight-style tables; then the cross-rank comparison.
func TraceText(w io.Writer, res TraceResult) error {
	p := &printer{w: w}
	for i, r := range res.Reports {
		if i > 0 {
			p.line("")
			p.line(strings.Repeat("=", 78))
		}
		p.report(r)
	}
	if res.Multi != nil && len(res.Multi.Ranks) > 1 {
		p.line("")
		p.line(strings.Repeat("=", 78))
		p.multi(res.Multi)
	}
	if len(res.Skipped) > 0 {
		p.line("")
		p.line("NOT READ: %d file(s); the report above covers the others:", len(res.Skipped))
		for _, s := range res.Skipped {
			p.line("  %s: %s", Clean(s.File), Clean(s.Reason))
		}
	}
	p.line("")
	p.line("%s", ExplainHint)
	return p.err
}

type printer struct {
	w   io.Writer
	err error
	// window is the report's evidence window, said once in its header.
	window string
}

func (p *printer) line(format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
}

func rankText(r int) string {
	if r < 0 {
		return "rank unknown"
	}
	return fmt.Sprintf("rank %d", r)
}

func (p *printer) report(r *tracejudge.RankReport) {
	v := r.Verdict
	byID := map[string]*finding.Finding{}
	for i := range r.Findings {
		byID[r.Findings[i].ID] = &r.Findings[i]
	}
	// Every evidence line of a report covers the same window: say it once.
	window := ""
	for _, f := range r.Findings {
		if len(f.Evidence) > 0 {
			window = f.Evidence[0].Window
			break
		}
	}
	p.window = window
	head := fmt.Sprintf("VERDICT: %s (confidence %.0f%%) — %s, %s", v.Class, v.Confidence*100, Clean(filepath.Base(r.Source)), rankText(r.Rank))
	if window != "" {
		head += ", " + Clean(window)
	}
	p.line("%s", head)
	p.line("  %s", Clean(v.Summary))
	// The verdict's evidence: its first two numbers, then the decision, then the rest.
	var ev []finding.Evidence
	shown := map[string]bool{}
	for _, id := range v.Because {
		if f := byID[id]; f != nil {
			shown[id] = true
			ev = append(ev, f.Evidence...)
		}
	}
	for _, e := range ev[:min(2, len(ev))] {
		p.evidence("  ", e)
	}
	if v.Decision != "" {
		p.line("DECISION: %s", Clean(v.Decision))
	}
	if v.Missing != "" {
		p.line("MISSING: %s", Clean(v.Missing))
	}
	if r.Confidence.Text != "" {
		p.line("CONFIDENCE: %s", Clean(r.Confidence.Text))
	}
	if len(ev) > 2 {
		p.line("  more evidence (%s):", strings.Join(v.Because, ", "))
		for _, e := range ev[2:] {
			p.evidence("    ", e)
		}
	}
	p.line("")
	p.line("FINDINGS")
	for _, f := range r.Findings {
		// A finding whose evidence is shown with the verdict is marked so;
		// an inconclusive verdict concludes nothing, so its findings are
		// only "shown above", and keep their own decision when the verdict
		// gives none.
		mark := ""
		if shown[f.ID] {
			mark = " (verdict)"
			if v.Class == finding.Inconclusive {
				mark = " (shown above)"
			}
		}
		p.line("  [%s] %s%s: %s", f.Severity, f.ID, mark, Clean(f.Claim))
		if !shown[f.ID] {
			for _, e := range f.Evidence {
				p.evidence("      ", e)
			}
		}
		if f.Decision != "" && (!shown[f.ID] || v.Decision == "") {
			p.line("      → %s", Clean(f.Decision))
		}
	}
	p.attribution(r)
	p.steps(r)
	p.hta(r)
	p.nsight(r)
	p.line("")
	p.line("SCOPE: %d GPU operations, %d steps analysed, %d left out. %s", r.Scope.GPUOps, r.Scope.Steps, r.Scope.DroppedSteps, r.Scope.Note)
	c := r.Counts
	read := fmt.Sprintf("READ: %d events (%d GPU ops, %d runtime calls, %d CPU ranges; %d flow, %d metadata, %d ignored, %d with bad times",
		c.Events, c.GPUOps, c.RuntimeCalls, c.CPUOps, c.Flows, c.Metadata, c.Ignored, c.BadTime)
	if c.NoPhase > 0 {
		read += fmt.Sprintf(", %d without a phase", c.NoPhase)
	}
	read += fmt.Sprintf("); %d GPU ops without a launch record", c.Unlinked)
	if c.AmbiguousCorr > 0 {
		read += fmt.Sprintf(", %d whose correlation id is not unique", c.AmbiguousCorr)
	}
	p.line("%s", read)
	for _, w := range r.Warnings {
		p.line("WARNING: %s", Clean(w))
	}
	p.window = ""
}

func (p *printer) evidence(indent string, e finding.Evidence) {
	val := e.Text
	if val == "" {
		val = strings.TrimSpace(fmt.Sprintf("%g %s", e.Value, e.Unit))
	}
	where := Clean(e.Source)
	if e.Window != "" && e.Window != p.window {
		where = Clean(e.Window) + "; " + where
	}
	p.line("%s- %s: %s  [%s]", indent, Clean(e.What), Clean(val), where)
}

func (p *printer) attribution(r *tracejudge.RankReport) {
	at := &r.Attribution
	if at.SpanNs == 0 {
		return
	}
	p.line("")
	p.line("GPU IDLE ATTRIBUTION: %.1f ms idle of %.1f ms (%.1f %%) in %d gaps; what the launching thread did meanwhile:",
		nsToMS(at.IdleNs), nsToMS(at.SpanNs), sharePct(at.IdleNs, at.SpanNs), at.Gaps)
	p.line("  %-18s %12s %10s %12s", "cause", "idle ms", "% of span", "after a sync")
	for _, c := range tracestats.Causes() {
		if at.ByCause[c] == 0 {
			continue
		}
		as := ""
		if at.AfterSync[c] > 0 {
			as = fmt.Sprintf("%.3f", nsToMS(at.AfterSync[c]))
		}
		p.line("  %-18s %12.3f %10.2f %12s", c, nsToMS(at.ByCause[c]), sharePct(at.ByCause[c], at.SpanNs), as)
	}
	if len(at.Threads) > 0 {
		var parts []string
		for _, t := range at.Threads[:min(3, len(at.Threads))] {
			name := ""
			if t.Name != "" {
				name = " " + Clean(t.Name)
			}
			parts = append(parts, fmt.Sprintf("tid %d%s %.1f ms", t.TID, name, nsToMS(t.Ns)))
		}
		p.line("  launching threads: %s", strings.Join(parts, "; "))
	}
	if len(at.TopOps) > 0 {
		var parts []string
		for _, o := range at.TopOps {
			parts = append(parts, fmt.Sprintf("%s %.1f ms", short(o.Name, 48), nsToMS(o.Ns)))
		}
		p.line("  CPU ranges during host-wait gaps: %s", strings.Join(parts, "; "))
	}
	if len(at.Longest) > 0 {
		p.line("  longest gaps:")
		for _, g := range at.Longest {
			var parts []string
			for _, c := range tracestats.Causes() {
				if g.ByCause[c] > 0 {
					parts = append(parts, fmt.Sprintf("%s %.3f", c, nsToMS(g.ByCause[c])))
				}
			}
			step := ""
			if g.Step >= 0 {
				step = fmt.Sprintf(" step %d,", g.Step)
			}
			after := ""
			if g.AfterSync {
				after = " [began inside a sync]"
			}
			p.line("    %.3f ms at +%.3f ms,%s before %s: %s%s", nsToMS(g.DurNs), nsToMS(g.StartNs-r.Scope.StartNs), step, short(g.Next, 40), strings.Join(parts, ", "), after)
		}
	}
}

func (p *printer) steps(r *tracejudge.RankReport) {
	if len(r.Steps) == 0 {
		return
	}
	p.line("")
	p.line("PER STEP")
	p.line("  %-8s %10s %8s %10s %12s %6s  %s", "step", "dur ms", "busy %", "idle ms", "dataloader %", "syncs", "main idle cause")
	for _, s := range r.Steps {
		top, topNs := "", int64(0)
		for _, c := range tracestats.Causes() {
			if s.ByCause[c] > topNs {
				top, topNs = c.String(), s.ByCause[c]
			}
		}
		p.line("  %-8d %10.3f %8.1f %10.3f %12.1f %6d  %s", s.Number, nsToMS(s.DurNs), sharePct(s.GPUBusyNs, s.DurNs), nsToMS(s.IdleNs), sharePct(s.DataLoaderNs, s.DurNs), s.Syncs, top)
	}
}

func (p *printer) hta(r *tracejudge.RankReport) {
	tb := r.Temporal
	if tb.SpanNs == 0 {
		return
	}
	p.line("")
	p.line("HTA-COMPATIBLE NUMBERS")
	p.line("  temporal breakdown over %.3f ms: idle %.3f ms (%.2f %%), compute %.3f ms (%.2f %%), non-compute %.3f ms (%.2f %%)",
		nsToMS(tb.SpanNs), nsToMS(tb.IdleNs), tb.Pct(tb.IdleNs), nsToMS(tb.ComputeNs), tb.Pct(tb.ComputeNs), nsToMS(tb.NonComputeNs), tb.Pct(tb.NonComputeNs))
	p.line("  idle time per stream (consecutive-kernel delay %g µs):", float64(thresholds.ConsecutiveKernelDelay.Microseconds()))
	p.line("    %-6s %-8s %6s %14s %14s %14s", "device", "stream", "ops", "host_wait ms", "kernel_wait ms", "other ms")
	for _, s := range r.Idle {
		p.line("    %-6d %-8d %6d %8.3f (%3.0f%%) %8.3f (%3.0f%%) %8.3f (%3.0f%%)", s.Device, s.Stream, s.Ops,
			nsToMS(s.HostWait), 100*s.Ratio(s.HostWait), nsToMS(s.KernelWait), 100*s.Ratio(s.KernelWait), nsToMS(s.Other), 100*s.Ratio(s.Other))
	}
	l := r.Launch
	if l.Launches > 0 {
		p.line("  kernel launches: %d; launch call p50 %.1f µs, p95 %.1f µs, max %.1f µs (%d over %g µs); launch delay p50 %.1f µs, p95 %.1f µs, max %.1f µs (%d over %g µs); %d short kernels",
			l.Launches, l.RuntimeUs.P50, l.RuntimeUs.P95, l.RuntimeUs.Max, l.RuntimeOutliers, float64(thresholds.LaunchRuntimeOutlier.Microseconds()),
			l.DelayUs.P50, l.DelayUs.P95, l.DelayUs.Max, l.DelayOutliers, float64(thresholds.LaunchDelayOutlier.Microseconds()), l.ShortKernels)
	}
	if len(r.QueueLength) > 0 {
		p.line("  queue length per stream (mean / p50 / p75 / max):")
		for _, q := range r.QueueLength {
			p.line("    device %d stream %d: %.1f / %.0f / %.0f / %.0f (%d samples)", q.Device, q.Stream, q.Mean, q.P50, q.P75, q.Max, q.Count)
		}
	}
}

func (p *printer) nsight(r *tracejudge.RankReport) {
	if r.Scope.GPUOps == 0 {
		return
	}
	ru := r.Rules
	src := "events"
	if ru.FromSQL {
		src = "SQL over the report"
	}
	p.line("")
	p.line("NSIGHT-STYLE RULES (call totals from %s)", src)
	row := func(name string, c tracestats.CallTotals) {
		extra := ""
		if c.Bytes > 0 {
			extra = fmt.Sprintf(", %d bytes", c.Bytes)
		}
		p.line("  %-30s %6d calls, %10.3f ms host time, longest %.3f ms%s", name, c.Count, nsToMS(c.HostNs), nsToMS(c.MaxNs), extra)
	}
	row("async copies, pageable memory", ru.PageableCopies)
	row("synchronous copies", ru.SyncCopies)
	row("synchronous memsets", ru.SyncMemsets)
	row("stream synchronizations", ru.StreamSyncs)
	row("device synchronizations", ru.DeviceSyncs)
	row("event synchronizations", ru.EventSyncs)
	p.line("  GPU gaps >= %.0f ms: %d", nsToMS(ru.GapThresholdNs), len(ru.Gaps))
	for _, g := range ru.Gaps[:min(5, len(ru.Gaps))] {
		p.line("    device %d: %.3f ms at +%.3f ms", g.Device, nsToMS(g.DurNs), nsToMS(g.StartNs-r.Scope.StartNs))
	}
	p.line("  low-use windows (< %.0f %% GPU time, %d chunks): %d", ru.LowUsePct, thresholds.NsightLowUseChunks, len(ru.LowUse))
	for _, w := range ru.LowUse[:min(5, len(ru.LowUse))] {
		p.line("    device %d: %.3f ms at +%.3f ms, %.1f %% in use", w.Device, nsToMS(w.DurNs), nsToMS(w.StartNs-r.Scope.StartNs), w.UsePct)
	}
}

func (p *printer) multi(m *tracejudge.MultiRank) {
	p.line("RANKS: %d compared", len(m.Ranks))
	p.line("  %-6s %-20s %6s %10s %10s %10s %10s  %s", "rank", "verdict", "conf", "idle %", "input %", "sync %", "step ms", "file")
	for _, r := range m.Ranks {
		p.line("  %-6d %-20s %6.2f %10.1f %10.1f %10.1f %10.3f  %s", r.Rank, r.Verdict.Class, r.Verdict.Confidence, r.Shares.IdlePct, r.Shares.Input, r.Shares.Sync, nsToMS(r.StepMedianNs), Clean(filepath.Base(r.Source)))
	}
	if len(m.Stragglers) == 0 {
		p.line("  no straggler: no rank enters collectives late by %.0f %% of the median step time", thresholds.StragglerLagPct)
	}
	for _, f := range m.Findings {
		p.line("  [%s] %s: %s", f.Severity, f.ID, Clean(f.Claim))
		for _, e := range f.Evidence {
			p.evidence("      ", e)
		}
		if f.Decision != "" {
			p.line("      → %s", Clean(f.Decision))
		}
	}
}
