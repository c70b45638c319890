// The output of gpufeed trace: trace analysis reports as text for people
// and JSON for programs. It computes nothing: every number comes from the
// reports.

package render

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// TraceReport is everything `gpufeed trace` reports: one report per rank and,
// with several ranks, their comparison.
type TraceReport struct {
	// Header is set by the command that writes the report.
	Header  Header
	Reports []*tracejudge.RankReport
	Multi   *tracejudge.MultiRank
	// Skipped are the files named (or found in a directory) that were not
	// read, each with the reason.
	Skipped []TraceSkipped
	// Traces are the traces Reports came from, in the same order, kept
	// only for the timeline renderer (Perfetto); nil otherwise, so each
	// trace is dropped once judged. Their reports were analysed with
	// tracejudge.Options.KeepGaps.
	Traces []*trace.Trace `json:"-"`
}

// TraceSkipped is a file that was not read and why.
type TraceSkipped struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

func nsToMS(ns int64) float64 { return float64(ns) / 1e6 }

func sharePct(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// Trace writes the trace report. One rank: by default its verdict, the
// numbers behind it, the decision, one line per other finding and one line
// on what was read; verbose adds every finding's evidence and the HTA- and
// Nsight-style tables. Several ranks: the ranks table first, then the
// cross-rank findings; Options.Rank picks one rank's detail, verbose shows
// every rank's.
func (textRenderer) Trace(w io.Writer, res *TraceReport, o Options) error {
	// Nothing runs past the terminal: a line longer than the width (a
	// table row, a verbose line) wraps under its own indentation.
	p := &printer{o: o}
	p.wrapAt = o.width()
	multi := res.Multi != nil && len(res.Multi.Ranks) > 1
	reports := res.Reports
	if o.Rank != nil {
		reports = nil
		for _, r := range res.Reports {
			if r.Rank == *o.Rank {
				reports = append(reports, r)
			}
		}
		if len(reports) == 0 {
			var ranks []string
			for _, r := range res.Reports {
				ranks = append(ranks, strconv.Itoa(r.Rank))
			}
			return fmt.Errorf("--rank %d: no such rank in the trace (ranks: %s)", *o.Rank, strings.Join(ranks, ", "))
		}
	}
	switch {
	case multi && o.Rank == nil:
		p.multi(res.Multi)
		if o.Verbose {
			for _, r := range reports {
				p.line("")
				p.line("%s", strings.Repeat("=", 78))
				p.report(r)
			}
		} else {
			p.line("%s", clip("--rank N: one rank's verdict and findings", p.o.width()))
			p.line("%s", clip(moreHint, p.o.width()))
		}
	default:
		for i, r := range reports {
			if i > 0 {
				p.line("")
				p.line("%s", strings.Repeat("=", 78))
			}
			p.report(r)
		}
	}
	if len(res.Skipped) > 0 {
		p.line("")
		p.line("NOT READ: %d file(s); the report above covers the others:", len(res.Skipped))
		for _, s := range res.Skipped {
			p.line("  %s: %s", s.File, s.Reason)
		}
	}
	if o.Verbose {
		p.line("")
		p.line("%s", ExplainHint)
	}
	return p.flush(w)
}

type printer struct {
	textOut
	o Options
	// window is the report's evidence window, said once in its header.
	window string
}

func rankText(r int) string {
	if r < 0 {
		return "rank unknown"
	}
	return fmt.Sprintf("rank %d", r)
}

func traceConfidence(v finding.Verdict) string {
	return fmt.Sprintf("%.0f%%", v.Confidence*100)
}

func (p *printer) report(r *tracejudge.RankReport) {
	v := r.Verdict
	width := p.o.width()
	byID := map[string]*finding.Finding{}
	for i := range r.Findings {
		byID[r.Findings[i].ID] = &r.Findings[i]
	}
	// Every evidence line of a report covers the same window: say it once.
	p.window = sharedWindow(r.Findings)
	if p.window == "" {
		for _, f := range r.Findings {
			if len(f.Evidence) > 0 {
				p.window = f.Evidence[0].Window
				break
			}
		}
	}
	head := fmt.Sprintf("VERDICT: %s (confidence %s) — %s, %s", v.Class, traceConfidence(v), filepath.Base(r.Source), rankText(r.Rank))
	if p.window != "" {
		head += ", " + p.window
	}
	// The verdict's evidence: its first numbers, then the decision.
	var ev []finding.Evidence
	shown := map[string]bool{}
	for _, id := range v.Because {
		if f := byID[id]; f != nil {
			shown[id] = true
			ev = append(ev, f.Evidence...)
		}
	}
	if !p.o.Verbose {
		// The verdict, its numbers, the decision and what is missing come
		// whole; only the listing of the other findings is clipped.
		for _, l := range wrapWhole(head, width, "", "  ") {
			p.line("%s", l)
		}
		for _, l := range wrapWhole(v.Summary, width, "  ", "  ") {
			p.line("%s", l)
		}
		for _, e := range ev[:min(verdictEvidenceShown, len(ev))] {
			for _, l := range numberLines("  - ", e, width) {
				p.line("%s", l)
			}
		}
		if v.Decision != "" {
			for _, l := range wrapWhole("DECISION: "+v.Decision, width, "", "  ") {
				p.line("%s", l)
			}
		}
		if v.Missing != "" {
			for _, l := range wrapWhole("MISSING: "+v.Missing, width, "", "  ") {
				p.line("%s", l)
			}
		}
		for _, f := range r.Findings {
			if shown[f.ID] {
				continue
			}
			p.line("%s", clip(fmt.Sprintf("  %s %s: %s", strings.ToUpper(f.Severity.String()), f.ID, f.Claim), width))
		}
		for _, l := range wrap(p.readLine(r), width, "", "  ", 2) {
			p.line("%s", l)
		}
		for _, w := range r.Warnings {
			for _, l := range wrap("WARNING: "+w, width, "", "  ", 3) {
				p.line("%s", l)
			}
		}
		p.line("%s", clip(moreHint, width))
		return
	}
	p.line("%s", head)
	p.line("  %s", v.Summary)
	if v.Decision != "" {
		p.line("DECISION: %s", v.Decision)
	}
	if v.Missing != "" {
		p.line("MISSING: %s", v.Missing)
	}
	if r.Confidence.Text != "" {
		p.line("CONFIDENCE: %s", r.Confidence.Text)
	}
	p.line("")
	p.line("FINDINGS")
	for _, f := range r.Findings {
		// An inconclusive verdict concludes nothing: the findings it names
		// are only "shown above".
		mark := ""
		if shown[f.ID] {
			mark = " (verdict)"
			if v.Class == finding.Inconclusive {
				mark = " (shown above)"
			}
		}
		p.line("  [%s] %s%s: %s", f.Severity, f.ID, mark, f.Claim)
		for _, e := range f.Evidence {
			p.line("      - %s", evidenceLine(e, p.window, true))
		}
		if f.Decision != "" && f.Decision != v.Decision {
			p.line("      → %s", f.Decision)
		}
	}
	p.attribution(r)
	p.steps(r)
	p.hta(r)
	p.nsight(r)
	p.line("")
	p.line("SCOPE: %s, %s analysed, %d left out. %s", safetext.Count(r.Scope.GPUOps, "GPU operation", "GPU operations"), safetext.Count(r.Scope.Steps, "step", "steps"), r.Scope.DroppedSteps, r.Scope.Note)
	p.line("%s", p.readLine(r))
	for _, w := range r.Warnings {
		p.line("WARNING: %s", w)
	}
	p.window = ""
}

// readLine says what was read: the events by kind and what was left out.
func (p *printer) readLine(r *tracejudge.RankReport) string {
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
	return read
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
				name = " " + t.Name
			}
			parts = append(parts, fmt.Sprintf("tid %d%s %.1f ms", t.TID, name, nsToMS(t.Ns)))
		}
		p.line("  launching threads: %s", strings.Join(parts, "; "))
	}
	if len(at.TopOps) > 0 {
		var parts []string
		for _, o := range at.TopOps {
			parts = append(parts, fmt.Sprintf("%s %.1f ms", shortName(o.Name, 48), nsToMS(o.Ns)))
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
			p.line("    %.3f ms at +%.3f ms,%s before %s: %s%s", nsToMS(g.DurNs), nsToMS(g.StartNs-r.Scope.StartNs), step, shortName(g.Next, 40), strings.Join(parts, ", "), after)
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
	p.line("  %-5s %-20s %5s %7s %8s %7s %9s  %s", "rank", "verdict", "conf", "idle %", "input %", "sync %", "step ms", "file")
	for _, r := range m.Ranks {
		p.line("  %-5d %-20s %5s %7.1f %8.1f %7.1f %9.3f  %s", r.Rank, r.Verdict.Class, traceConfidence(r.Verdict),
			r.Shares.IdlePct, r.Shares.Input, r.Shares.Sync, nsToMS(r.StepMedianNs), filepath.Base(r.Source))
	}
	if len(m.Stragglers) == 0 {
		p.line("  no straggler: no rank enters collectives late by %.0f %% of the median step time", thresholds.StragglerLagPct)
	}
	for _, f := range m.Findings {
		if !p.o.Verbose {
			p.line("%s", clip(fmt.Sprintf("  %s %s: %s", strings.ToUpper(f.Severity.String()), f.ID, f.Claim), p.o.width()))
			continue
		}
		p.line("  [%s] %s: %s", f.Severity, f.ID, f.Claim)
		for _, e := range f.Evidence {
			p.line("      - %s", evidenceLine(e, "", true))
		}
		if f.Decision != "" {
			p.line("      → %s", f.Decision)
		}
	}
}
