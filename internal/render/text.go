package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Text writes the human report. With a verdict it leads with the verdict and
// its evidence, then the decision, then the other findings, then the tables;
// without one it starts with the tables. Every name from the target is
// cleaned of control characters.
func Text(w io.Writer, r *Report) error {
	tw := &textWriter{w: w}
	if r.Verdict != nil {
		tw.verdict(r)
	}
	tw.header(r)
	tw.processes(r)
	tw.threads(r)
	tw.host(r)
	tw.gpus(r)
	if r.Verdict == nil && len(r.Findings) > 0 {
		tw.printf("\nFINDINGS\n")
		for _, f := range r.Findings {
			tw.finding(f, "")
		}
	}
	tw.facts(r)
	tw.printf("\n%s\n", ExplainHint)
	return tw.err
}

type textWriter struct {
	w   io.Writer
	err error
}

func (t *textWriter) printf(format string, args ...any) {
	if t.err != nil {
		return
	}
	_, t.err = fmt.Fprintf(t.w, format, args...)
}

func (t *textWriter) table(fn func(tw *tabwriter.Writer)) {
	if t.err != nil {
		return
	}
	tw := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
	fn(tw)
	t.err = tw.Flush()
}

// verdictEvidenceShown is how many evidence lines the verdict's headline
// shows: with the verdict line and the decision, a reader who stops after
// five lines knows what is wrong, the numbers that say so, and what to change.
const verdictEvidenceShown = 3

func (t *textWriter) verdict(r *Report) {
	v := r.Verdict
	t.printf("VERDICT: %s (confidence %.0f%%): %s\n", v.Class, v.Confidence*100, Clean(v.Summary))
	byID := map[string]finding.Finding{}
	for _, f := range r.Findings {
		if _, ok := byID[f.ID]; !ok {
			byID[f.ID] = f
		}
	}
	if len(v.Because) > 0 {
		if f, ok := byID[v.Because[0]]; ok {
			for i, e := range f.Evidence {
				if i == verdictEvidenceShown {
					break
				}
				t.printf("  - %s\n", evidence(e))
			}
		}
	}
	if v.Decision != "" {
		t.printf("DECISION: %s\n", Clean(v.Decision))
	}
	if v.Missing != "" {
		t.printf("TO CONCLUDE: %s\n", Clean(v.Missing))
	}
	if v.Basis != "" {
		t.printf("CONFIDENCE: %s\n", Clean(v.Basis))
	}
	if len(r.Findings) == 0 {
		t.printf("\n")
		return
	}
	because := map[string]bool{}
	for _, id := range v.Because {
		because[id] = true
	}
	t.printf("\nFINDINGS (the verdict's first, then by severity)\n")
	for _, f := range r.Findings {
		mark := ""
		if because[f.ID] {
			mark = " (verdict)"
		}
		t.finding(f, mark)
	}
	t.printf("\n")
}

// finding writes one finding: severity, id, mark, subject and claim on one
// line, then its evidence, the change it calls for and its seed section.
func (t *textWriter) finding(f finding.Finding, mark string) {
	subject := ""
	if f.Subject != "" {
		subject = " [" + Clean(f.Subject) + "]"
	}
	t.printf("  %s %s%s%s: %s\n", strings.ToUpper(f.Severity.String()), f.ID, mark, subject, Clean(f.Claim))
	for _, e := range f.Evidence {
		t.printf("      %s\n", evidence(e))
	}
	if f.Decision != "" {
		t.printf("      change: %s\n", Clean(f.Decision))
	}
}

func evidence(e finding.Evidence) string {
	val := e.Text
	if val == "" {
		val = trimFloat(e.Value)
		if e.Unit != "" {
			if strings.HasPrefix(e.Unit, "%") {
				val += e.Unit // "42%", "42% of wall time"
			} else {
				val += " " + e.Unit
			}
		}
	}
	s := Clean(e.What) + ": " + Clean(val)
	var ctx []string
	if e.Window != "" {
		ctx = append(ctx, Clean(e.Window))
	}
	if e.Source != "" {
		ctx = append(ctx, Clean(e.Source))
	}
	if len(ctx) > 0 {
		s += " (" + strings.Join(ctx, "; ") + ")"
	}
	return s
}

func trimFloat(v float64) string {
	switch {
	case v == float64(int64(v)):
		return fmt.Sprintf("%d", int64(v))
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10 || v <= -10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func (t *textWriter) header(r *Report) {
	what := fmt.Sprintf("pid %d (%s)", r.Target.PID, Clean(r.Target.Comm))
	if r.Target.Launched && len(r.Target.Command) > 0 {
		what = fmt.Sprintf("%s, pid %d", CleanArgs(r.Target.Command), r.Target.PID)
	}
	t.printf("gpufeed %s: %s on %s (%d CPUs, Linux %s)\n", "observation", what, Clean(r.Machine.Hostname), r.Machine.NumCPU, r.Machine.Kernel)
	t.printf("window: %.1f s of %.1f s planned, %d samples every %s (slow tier %s, rollup %s), started %s, ended: %s\n",
		r.Window.Seconds, r.Window.PlannedSecs, r.Window.Samples, r.Window.Interval, r.Window.SlowTier, r.Window.RollupTier,
		r.Window.Started, r.Window.Ended)
	if r.Target.ExitCode != nil {
		t.printf("target exited with status %d\n", *r.Target.ExitCode)
	}
	for _, n := range r.Notes {
		t.printf("note: %s\n", Clean(n))
	}
}

func (t *textWriter) processes(r *Report) {
	t.printf("\nPROCESSES (CPU in %% of one core per %s interval)\n", r.Window.Interval)
	t.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "PID\tPPID\tROLE\tTHREADS\tCPU p50/p95/max\tRSS\tPSS\tUSS\tUSS growth\tFDs/limit\tread/s\tmean read\tdisk read/s\tCOMMAND")
		for _, p := range r.Processes {
			role := p.Role
			if p.Rank != "" {
				role += " " + Clean(p.Rank)
			}
			if p.Exited {
				role += " (exited)"
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				p.PID, p.PPID, dash(role), p.ThreadCount, stat3(p.CPUPercent), bytesOf(p.RSSBytes), bytesOf(p.PSSBytes),
				bytesOf(p.USSBytes), rateBytes(p.USSGrowthBps), fds(p.FDs, p.FDLimit), rateBytes(p.ReadBytesPerSec),
				bytesOf(p.MeanReadBytes), rateBytes(p.DiskReadBytesPerSec), truncate(cmdOf(p), 60))
		}
	})
}

func cmdOf(p Process) string {
	if len(p.Cmdline) > 0 {
		return CleanArgs(p.Cmdline)
	}
	return "[" + Clean(p.Comm) + "]"
}

func (t *textWriter) threads(r *Report) {
	t.printf("\nTHREADS (CPU and run-queue wait in %% of wall time per %s interval; switches per second)\n", r.Window.Interval)
	for _, p := range r.Processes {
		role := p.Role
		if p.Rank != "" {
			role += " " + Clean(p.Rank)
		}
		t.printf("pid %d %s (%s)\n", p.PID, Clean(p.Comm), dash(role))
		t.table(func(tw *tabwriter.Writer) {
			fmt.Fprintln(tw, "  TID\tNAME\tROLE\tCPU p50/p95/max\tuser\trunq wait mean/p95\tvol/s\tinvol/s\tSTATE\tWAITING IN")
			for _, th := range p.Threads[:p.ShownThreads] {
				name := Clean(th.Comm)
				if th.Exited {
					name += " (exited)"
				}
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\n", th.TID, name, dash(th.Role), stat3(th.CPUPercent),
					pct(th.UserPercent), pct(th.RunQueueWaitPercent), pct(th.RunQueueWaitPercentP95),
					rate(th.VoluntaryPerSec), rate(th.InvoluntaryPerSec), dash(th.State), blocked(th))
			}
		})
		if h := p.HiddenThreads; h != nil {
			t.printf("  ... and %d quiet threads (each under %.0f%% CPU p95 and %.0f%% run-queue wait; max p95 %.1f%%)\n",
				h.Count, quietThreadCPU, quietThreadWait, h.MaxCPUP95)
		}
	}
}

func blocked(th Thread) string {
	b := th.Blocked
	if b == nil {
		return "-"
	}
	var parts []string
	if b.Syscall != "" {
		s := b.Syscall
		if b.On != "" {
			s += " on " + Clean(b.On)
		}
		parts = append(parts, s)
	}
	if b.Wchan != "" {
		parts = append(parts, "in "+Clean(b.Wchan))
	}
	if b.NotVisible != "" {
		parts = append(parts, "("+Clean(b.NotVisible)+")")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func (t *textWriter) host(r *Report) {
	h := r.Host
	if h == nil {
		t.printf("\nHOST: not sampled\n")
		return
	}
	t.printf("\nHOST (%d CPUs)\n", h.NumCPU)
	t.printf("  all CPUs busy p50/p95/max: %s; iowait mean %s\n", stat3(h.BusyPercent), pct(h.IOWaitPct))
	t.printf("  run queue (procs_running, host-wide) p50/p95/max: %s; per CPU p95 %s; blocked (D) max %s\n",
		count3(h.RunQueue), ratio(h.RunQueuePerCPU), count(h.ProcsBlocked))
	if len(h.Busiest) > 0 {
		var parts []string
		for _, c := range h.Busiest {
			parts = append(parts, fmt.Sprintf("cpu%d %s busy (user %s, sys %s, iowait %s, irq %s, steal %s)",
				c.CPU, pct(c.Busy), pct(c.User), pct(c.System), pct(c.IOWait), pct(c.IRQ), pct(c.Steal)))
		}
		t.printf("  busiest CPUs (mean): %s\n", strings.Join(parts, "; "))
	}
	if p := h.PSI; p != nil {
		t.printf("  pressure (mean share of time stalled): cpu some %s; memory some %s full %s; io some %s full %s\n",
			pct(p.CPUSome), pct(p.MemSome), pct(p.MemFull), pct(p.IOSome), pct(p.IOFull))
	}
	t.printf("  memory: available %s of %s; dirty %s\n", bytesOf(h.MemAvailable), bytesOf(h.MemTotal), bytesOf(h.Dirty))
	if len(h.Disks) > 0 {
		t.table(func(tw *tabwriter.Writer) {
			fmt.Fprintln(tw, "  DISK\treads/s\tread kB/s\twrites/s\twrite kB/s\tawait\tutil")
			for _, d := range h.Disks {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", Clean(d.Name), rate(d.ReadsPerSec), rate(d.ReadKBPerSec),
					rate(d.WritesPerSec), rate(d.WriteKBPerSec), ms(d.AwaitMS), pct(d.UtilPercent))
			}
		})
	}
}

func (t *textWriter) gpus(r *Report) {
	t.printf("\nGPUS (%s)\n", dash(Clean(r.GPUSource)))
	if len(r.GPUs) == 0 {
		t.printf("  none sampled\n")
		return
	}
	t.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "  GPU\tNAME\tutil p10/p50/p90\tmem util p50\tSM clock p50/min/max\tpower p50/limit\ttemp max\tPCIe tx/rx p50\tthrottle\tSTATUS")
		for _, g := range r.GPUs {
			status := "ok"
			if g.Lost != "" {
				status = "lost: " + Clean(g.Lost)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s/%s/%s\t%s\t%s/%s/%s\t%s/%s\t%s\t%s/%s\t%s\t%s\n", g.Index, Clean(g.Name),
				pct(g.UtilP10), pct(g.UtilP50), pct(g.UtilP90), pct(g.MemUtilP50),
				mhz(g.SMClockP50), mhz(g.SMClockMin), mhzU(g.MaxSMClock), watts(g.PowerP50), watts(g.PowerLimit),
				celsius(g.TempMax), rateBytes(g.PCIeTxP50), rateBytes(g.PCIeRxP50), gpu.DescribeClockEvents(g.ClockEventReasons), status)
		}
	})
}

func (t *textWriter) facts(r *Report) {
	if o := r.Observer; o != nil {
		t.printf("\nOBSERVER: gpufeed used %s of one core (%.3f s CPU), %s per thread-sample over %d thread-samples; tick p50 %.2f ms, max %.2f ms; %d overruns\n",
			pct(o.CPUPercentOfCore), o.CPUSeconds, us(o.USPerThreadSample), o.ThreadSamples, o.TickP50MS, o.TickMaxMS, o.Overruns)
	}
	c := r.Counts
	t.printf("COUNTS: %d threads and %d processes vanished mid-read (skipped); %d read errors; %d smaps_rollup reads postponed by budget\n",
		c.VanishedThreads, c.VanishedProcs, c.ReadErrors, c.RollupSkipped)
	for _, e := range r.Events {
		t.printf("EVENT at %.1f s: %s pid %d %s\n", e.AtSec, e.Kind, e.PID, Clean(e.Text))
	}
	if r.KernelLinesOther > 0 {
		t.printf("KERNEL LOG: %d lines about other processes since the job started left out (dmesg -T shows them)\n", r.KernelLinesOther)
	}
	for _, nv := range r.NotVisible {
		t.printf("NOT VISIBLE: %s %s: %s\n", Clean(nv.Subject), nv.Field, Clean(nv.Why))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func pct(p *float64) string {
	if p == nil {
		return "-"
	}
	if *p < 10 {
		return fmt.Sprintf("%.1f%%", *p)
	}
	return fmt.Sprintf("%.0f%%", *p)
}

func stat3(s Stat) string { return pct(s.P50) + "/" + pct(s.P95) + "/" + pct(s.Max) }

func count(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *p)
}

func count3(s Stat) string { return count(s.P50) + "/" + count(s.P95) + "/" + count(s.Max) }

func ratio(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *p)
}

func rate(p *float64) string {
	if p == nil {
		return "-"
	}
	if *p >= 100 {
		return fmt.Sprintf("%.0f", *p)
	}
	return fmt.Sprintf("%.1f", *p)
}

func ms(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", *p)
}

func us(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f µs", *p)
}

func mhz(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *p)
}

func mhzU(p *uint32) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%d MHz", *p)
}

func watts(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f W", *p)
}

func celsius(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f °C", *p)
}

func bytesOf(p *float64) string {
	if p == nil {
		return "-"
	}
	return humanBytes(*p)
}

func humanBytes(v float64) string {
	const unit = 1024.0
	// A value that rounds to 0 B prints as 0 B, never "-0 B" (a slope of
	// -0.3 B/s is no shrinkage).
	if v > -0.5 && v < 0.5 {
		v = 0
	}
	neg := v < 0
	if neg {
		v = -v
	}
	s := ""
	switch {
	case v < unit:
		s = fmt.Sprintf("%.0f B", v)
	case v < unit*unit:
		s = fmt.Sprintf("%.1f KiB", v/unit)
	case v < unit*unit*unit:
		s = fmt.Sprintf("%.1f MiB", v/unit/unit)
	default:
		s = fmt.Sprintf("%.2f GiB", v/unit/unit/unit)
	}
	if neg {
		return "-" + s
	}
	return s
}

func rateBytes(p *float64) string {
	if p == nil {
		return "-"
	}
	return humanBytes(*p) + "/s"
}

func fds(n *float64, limit *uint64) string {
	l := "-"
	switch {
	case limit == nil:
	case *limit == timeline.Unlimited:
		l = "unlimited"
	default:
		l = fmt.Sprintf("%d", *limit)
	}
	c := "-"
	if n != nil {
		c = fmt.Sprintf("%.0f", *n)
	}
	return c + "/" + l
}
