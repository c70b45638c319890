package render

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// textRenderer writes what people read: by default a short report (the
// verdict, its numbers, the decision, one line per other finding and one
// line about the run), wrapped to the terminal; with Options.Verbose every
// finding's evidence and the tables.
type textRenderer struct{}

// maxDefaultLines bounds the default diagnose report: the verdict, its
// numbers, the decision and the other findings fit on a screen.
const maxDefaultLines = 15

// verdictEvidenceShown is how many evidence lines the verdict's headline
// shows: with the verdict line and the decision, a reader who stops after
// five lines knows what is wrong, the numbers that say so, and what to change.
const verdictEvidenceShown = 3

// Diagnose writes the report of diagnose, report and demo.
func (textRenderer) Diagnose(w io.Writer, r *Report, o Options) error {
	tw := &textWriter{o: o, window: sharedWindow(r.Findings)}
	if o.Verbose {
		tw.wrapAt = o.width()
		tw.verbose(r)
	} else {
		tw.short(r)
	}
	return tw.flush(w)
}

type textWriter struct {
	textOut
	o Options
	// window is the evidence window most findings share (the sampling
	// window), said once in the header rather than on every line.
	window string
}

func (t *textWriter) table(fn func(tw *tabwriter.Writer)) {
	tw := tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	fn(tw)
	_ = tw.Flush()
}

// sharedWindow is the evidence window most evidence lines give.
func sharedWindow(fs []finding.Finding) string {
	n := map[string]int{}
	best := ""
	for _, f := range fs {
		for _, e := range f.Evidence {
			if e.Window == "" {
				continue
			}
			n[e.Window]++
			if n[e.Window] > n[best] || (n[e.Window] == n[best] && e.Window < best) {
				best = e.Window
			}
		}
	}
	if n[best] < 2 {
		return ""
	}
	return best
}

func verdictLine(v *finding.Verdict) string {
	return fmt.Sprintf("VERDICT: %s (confidence %.0f%%): %s", v.Class, v.Confidence*100, v.Summary)
}

// short is the default report: the verdict, its numbers, the decision and
// what would conclude come whole, wrapped to the terminal's width with a
// hanging indent, never cut; the other findings take the lines left of
// maxDefaultLines (the warnings, up to three, always), one each and clipped
// (a listing: -v lists them whole), and those that do not fit are counted
// on one line.
func (t *textWriter) short(r *Report) {
	width := t.o.width()
	v := r.Verdict
	var verdict, evidence, decision, missing []string
	first := ""
	if v != nil {
		verdict = wrapWhole(verdictLine(v), width, "", "  ")
		if f := verdictFinding(r.Findings, v); f != nil {
			first = f.ID
			for i, e := range f.Evidence {
				if i == verdictEvidenceShown {
					break
				}
				evidence = append(evidence, numberLines("  - ", e, width)...)
			}
		}
		if v.Decision != "" {
			decision = wrapWhole("DECISION: "+v.Decision, width, "", "  ")
		}
		if v.Missing != "" {
			missing = wrapWhole("TO CONCLUDE: "+v.Missing, width, "", "  ")
		}
	}
	var tail []string
	for i, n := range r.Notes {
		if i == 1 && len(r.Notes) > 2 {
			tail = append(tail, fmt.Sprintf("and %d more notes (-v)", len(r.Notes)-1))
			break
		}
		tail = append(tail, clip("note: "+n, width))
	}
	tail = append(tail, wrapWhole(runSummary(r), width, "", "  ")...)
	tail = append(tail, clip(moreHint, width))
	ranks := rankTable(r.Findings, width)
	if v != nil && v.Class == finding.Stalled {
		ranks = append(ranks, waitingStacks(r.Findings, width)...)
	}
	var others []finding.Finding
	for _, f := range r.Findings {
		if f.ID != first && f.ID != "ranks" {
			others = append(others, f)
		}
	}
	// The findings take the room left, and at least the lines they claim:
	// each warning or critical one (up to three), and one line for the rest.
	need := 0
	for _, f := range others {
		if f.Severity >= finding.Warning && need < 3 {
			need++
		}
	}
	if len(others) > need {
		need++
	}
	room := max(maxDefaultLines-len(verdict)-len(evidence)-len(decision)-len(missing)-len(ranks)-len(tail), need)
	var mid []string
	for i, f := range others {
		if len(others) > room && i == room-1 {
			rest := others[i:]
			mid = append(mid, clip(fmt.Sprintf("  … and %d more (%s): -v lists them", len(rest), severities(rest)), width))
			break
		}
		if i >= room {
			break
		}
		mid = append(mid, clip("  "+findingHead(f, v), width))
	}
	for _, part := range [][]string{verdict, evidence, decision, missing, ranks, mid, tail} {
		for _, l := range part {
			t.line("%s", l)
		}
	}
}

// maxRankRows bounds the per-rank table of the first screen; -v lists
// every rank.
const maxRankRows = 8

// rankTable is the first screen's per-rank table: one line per rank from
// the rank-straggler or ranks finding's "rank N" rows (the straggler's
// row marked), clipped; nil for a job without ranks.
func rankTable(fs []finding.Finding, width int) []string {
	for _, f := range fs {
		if f.ID != "rank-straggler" && f.ID != "ranks" {
			continue
		}
		straggler := ""
		if f.ID == "rank-straggler" {
			straggler = strings.TrimSuffix(strings.SplitN(f.Subject, " (", 2)[0], ")")
		}
		head := "RANKS: no straggler"
		if straggler != "" {
			head = "RANKS: the straggler is " + straggler + ", the others wait for it"
		}
		out := []string{clip(head, width)}
		n := 0
		for _, e := range f.Evidence {
			if !strings.HasPrefix(e.What, "rank ") {
				continue
			}
			if n == maxRankRows {
				out = append(out, clip("  … and more ranks (-v)", width))
				break
			}
			n++
			mark := "  "
			if e.What == straggler {
				mark = "> "
			}
			out = append(out, clip(mark+e.What+": "+e.Text, width))
		}
		return out
	}
	return nil
}

// maxStackRows bounds the waiting threads' lines of the first screen.
const maxStackRows = 8

// waitingStacks is a stalled job's first-screen account of where each
// thread waits in Python (asked with --py-stacks): one line per thread of
// the python-stacks findings, the program's own line (the innermost frame
// outside Python's standard library) and the call it waits in, files by
// their base names (-v gives the paths), clipped.
func waitingStacks(fs []finding.Finding, width int) []string {
	var out []string
	n, procs := 0, 0
	for _, f := range fs {
		if f.ID == "python-stacks" {
			procs++
		}
	}
	for _, f := range fs {
		if f.ID != "python-stacks" {
			continue
		}
		who := "  "
		if procs > 1 {
			who += f.Subject + " "
		}
		for _, e := range f.Evidence {
			if !strings.HasPrefix(e.What, "thread ") {
				continue
			}
			if n == maxStackRows {
				out = append(out, clip("  … and more threads (-v)", width))
				return out
			}
			if len(out) == 0 {
				out = append(out, "WHERE EACH THREAD WAITS (Python stacks):")
			}
			n++
			out = append(out, clip(who+e.What+": "+waitLine(e.Text), width))
		}
	}
	return out
}

// waitLine picks from a stack ("fn (path:line) <- caller (path:line) <-
// ...", innermost first) the program's own line and the call it waits in:
// "at one (train.py:7)" or "at <module> (train.py:19), in
// _wait_for_tstate_lock (threading.py:1139)".
func waitLine(stack string) string {
	frames := strings.Split(stack, " <- ")
	if len(frames) == 0 || !strings.HasSuffix(frames[0], ")") || !strings.Contains(frames[0], ":") {
		return stack // "no Python frame (native code or idle)"
	}
	own := -1
	for i, fr := range frames {
		if fr != "..." && !stdlibFrame(fr) {
			own = i
			break
		}
	}
	switch own {
	case 0:
		return "at " + shortFrame(frames[0])
	case -1:
		return "in " + shortFrame(frames[0])
	}
	return "at " + shortFrame(frames[own]) + ", in " + shortFrame(frames[0])
}

// stdlibFrame says a frame runs in Python's own library ("/lib/python3.11/").
func stdlibFrame(fr string) bool {
	i := strings.Index(fr, "/lib/python")
	return i >= 0 && !strings.Contains(fr[i:], "-packages/")
}

// shortFrame writes a frame's file by its base name: "join (threading.py:1119)".
func shortFrame(fr string) string {
	open, end := strings.LastIndexByte(fr, '('), strings.LastIndexByte(fr, ')')
	if open < 0 || end < open {
		return fr
	}
	file := fr[open+1 : end]
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	return fr[:open+1] + file + fr[end:]
}

// verdictFinding is the first finding the verdict names.
func verdictFinding(fs []finding.Finding, v *finding.Verdict) *finding.Finding {
	if v == nil {
		return nil
	}
	for _, id := range v.Because {
		for i := range fs {
			if fs[i].ID == id {
				return &fs[i]
			}
		}
	}
	return nil
}

// severities counts findings by severity: "2 warning, 3 info".
func severities(fs []finding.Finding) string {
	n := map[finding.Severity]int{}
	for _, f := range fs {
		n[f.Severity]++
	}
	var parts []string
	for _, s := range []finding.Severity{finding.Critical, finding.Warning, finding.Info} {
		if n[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
		}
	}
	return strings.Join(parts, ", ")
}

// findingHead is a finding's one line: severity, id, subject, claim.
func findingHead(f finding.Finding, v *finding.Verdict) string {
	mark := ""
	if v != nil && slices.Contains(v.Because, f.ID) {
		mark = " (verdict)"
	}
	subject := ""
	if f.Subject != "" {
		subject = " [" + f.Subject + "]"
	}
	return fmt.Sprintf("%s %s%s%s: %s", strings.ToUpper(f.Severity.String()), f.ID, mark, subject, f.Claim)
}

// runSummary is the one line about what was observed: target, host,
// window, GPUs and gpufeed's own cost.
func runSummary(r *Report) string {
	parts := []string{fmt.Sprintf("%s on %s (%d CPUs, Linux %s)", targetText(r), r.Machine.Hostname, r.Machine.NumCPU, r.Machine.Kernel)}
	win := fmt.Sprintf("%s, %d samples every %s", Duration(time.Duration(r.Window.DurationNS)), r.Window.Samples,
		Duration(time.Duration(r.Window.IntervalNS)))
	if r.Window.Ended != "" && r.Window.Ended != "duration" {
		win += " (" + r.Window.Ended + ")"
	}
	parts = append(parts, win)
	if r.Target.ExitCode != nil {
		parts = append(parts, fmt.Sprintf("target exited with status %d", *r.Target.ExitCode))
	}
	switch {
	case len(r.GPUs) == 0 && strings.Contains(strings.ToLower(r.GPUSource), "gpu"):
		parts = append(parts, r.GPUSource) // it says why no GPU was sampled
	case len(r.GPUs) == 0:
		parts = append(parts, "no GPU sampled ("+dash(r.GPUSource)+")")
	default:
		var gs []string
		for _, g := range r.GPUs {
			s := fmt.Sprintf("GPU %d %s util p50 %s", g.Index, g.Name, pct(g.UtilP50))
			if g.Lost != "" {
				s += " (lost)"
			}
			gs = append(gs, s)
		}
		if len(gs) > 2 {
			gs = append(gs[:2], fmt.Sprintf("%d more", len(gs)-2))
		}
		parts = append(parts, strings.Join(gs, ", "))
	}
	if o := r.Observer; o != nil {
		parts = append(parts, "gpufeed used "+pct(o.CPUPercentOfCore)+" of a core")
	}
	if n := len(r.NotVisible); n > 0 {
		parts = append(parts, fmt.Sprintf("%d facts not visible", n))
	}
	return strings.Join(parts, "; ")
}

func targetText(r *Report) string {
	if r.Target.Launched && len(r.Target.Command) > 0 {
		return fmt.Sprintf("%s (pid %d)", shortName(cmdLine(r.Target.Command), 40), r.Target.PID)
	}
	return fmt.Sprintf("pid %d (%s)", r.Target.PID, r.Target.Comm)
}

// verbose is everything: the verdict, the run, every finding with its
// evidence, and the tables. Nothing is said twice: the verdict's evidence
// is under its finding, the sampling window in the header.
func (t *textWriter) verbose(r *Report) {
	v := r.Verdict
	if v != nil {
		t.line("%s", verdictLine(v))
		if v.Decision != "" {
			t.line("DECISION: %s", v.Decision)
		}
		if v.Missing != "" {
			t.line("TO CONCLUDE: %s", v.Missing)
		}
		if v.Basis != "" {
			t.line("CONFIDENCE: %s", v.Basis)
		}
		t.line("")
	}
	t.header(r)
	if v != nil && len(r.Findings) > 0 {
		t.line("")
		t.line("FINDINGS (the verdict's first, then by severity)")
		for _, f := range r.Findings {
			t.finding(f, v)
		}
	}
	t.processes(r)
	t.threads(r)
	t.cpuProfile(r.CPUProfile)
	t.driverCalls(r.DriverCalls)
	t.syscalls(r.Syscalls)
	t.host(r)
	t.gpus(r)
	if v == nil && len(r.Findings) > 0 {
		t.line("")
		t.line("FINDINGS")
		for _, f := range r.Findings {
			t.finding(f, nil)
		}
	}
	t.facts(r)
	t.line("")
	t.line("%s", ExplainHint)
}

// finding writes one finding: its line, its evidence, the change it calls
// for (unless the verdict's decision already said it).
func (t *textWriter) finding(f finding.Finding, v *finding.Verdict) {
	t.line("  %s", findingHead(f, v))
	for _, e := range f.Evidence {
		t.line("      %s", evidenceLine(e, t.window, true))
	}
	if f.Decision != "" && (v == nil || f.Decision != v.Decision) {
		t.line("      change: %s", f.Decision)
	}
}

func (t *textWriter) header(r *Report) {
	what := fmt.Sprintf("pid %d (%s)", r.Target.PID, r.Target.Comm)
	if r.Target.Launched && len(r.Target.Command) > 0 {
		what = fmt.Sprintf("%s, pid %d", cmdLine(r.Target.Command), r.Target.PID)
	}
	wd := r.Window
	t.line("gpufeed observation: %s on %s (%d CPUs, Linux %s)", what, r.Machine.Hostname, r.Machine.NumCPU, r.Machine.Kernel)
	t.line("window: %s of %s planned, %d samples every %s (slow tier %s, rollup %s), started %s, ended: %s",
		Duration(time.Duration(wd.DurationNS)), Duration(time.Duration(wd.PlannedDurationNS)), wd.Samples,
		Duration(time.Duration(wd.IntervalNS)), Duration(time.Duration(wd.SlowTierNS)), Duration(time.Duration(wd.RollupTierNS)),
		wd.Started, wd.Ended)
	if t.window != "" {
		t.line("evidence below covers %s unless it says otherwise", t.window)
	}
	if r.Target.ExitCode != nil {
		t.line("target exited with status %d", *r.Target.ExitCode)
	}
	for _, n := range r.Notes {
		t.line("note: %s", n)
	}
}

func (t *textWriter) processes(r *Report) {
	t.printf("\nPROCESSES (CPU in %% of one core per %s interval)\n", Duration(time.Duration(r.Window.IntervalNS)))
	t.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "PID\tPPID\tROLE\tTHREADS\tCPU p50/p95/max\tRSS\tPSS\tUSS\tUSS growth\tFDs/limit\tread/s\tmean read\tdisk read/s\tCOMMAND")
		for _, p := range r.Processes {
			role := p.Role
			if p.Rank != "" {
				role += " " + p.Rank
			}
			if p.Exited {
				role += " (exited)"
			}
			rowf(tw, "%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				p.PID, p.PPID, dash(role), p.ThreadCount, stat3(p.CPUPercent), bytesOf(p.RSSBytes), bytesOf(p.PSSBytes),
				bytesOf(p.USSBytes), rateBytes(p.USSGrowthBps), fds(p.FDs, p.FDLimit), rateBytes(p.ReadBytesPerSec),
				bytesOf(p.MeanReadBytes), rateBytes(p.DiskReadBytesPerSec), shortName(cmdOf(p), 60))
		}
	})
}

func cmdOf(p Process) string {
	if len(p.Cmdline) > 0 {
		return cmdLine(p.Cmdline)
	}
	return "[" + p.Comm + "]"
}

func (t *textWriter) threads(r *Report) {
	t.printf("\nTHREADS (CPU and run-queue wait in %% of wall time per %s interval; switches per second)\n", Duration(time.Duration(r.Window.IntervalNS)))
	for _, p := range r.Processes {
		role := p.Role
		if p.Rank != "" {
			role += " " + p.Rank
		}
		t.printf("pid %d %s (%s)\n", p.PID, p.Comm, dash(role))
		t.table(func(tw *tabwriter.Writer) {
			fmt.Fprintln(tw, "  TID\tNAME\tROLE\tCPU p50/p95/max\tuser\trunq wait mean/p95\tvol/s\tinvol/s\tSTATE\tWAITING IN")
			for _, th := range p.Threads[:p.ShownThreads] {
				name := th.Comm
				if th.Exited {
					name += " (exited)"
				}
				rowf(tw, "  %d\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\n", th.TID, name, dash(th.Role), stat3(th.CPUPercent),
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
			s += " on " + b.On
		}
		parts = append(parts, s)
	}
	if b.Wchan != "" {
		parts = append(parts, "in "+b.Wchan)
	}
	if b.NotVisible != "" {
		parts = append(parts, "("+b.NotVisible+")")
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
			fmt.Fprintln(tw, "  DISK\treads/s\tread rate\twrites/s\twrite rate\tawait\tutil")
			for _, d := range h.Disks {
				rowf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, rate(d.ReadsPerSec), rateBytes(d.ReadBytesPerSec),
					rate(d.WritesPerSec), rateBytes(d.WriteBytesPerSec), nsDur(d.AwaitNS), pct(d.UtilPercent))
			}
		})
	}
}

func (t *textWriter) gpus(r *Report) {
	t.printf("\nGPUS (%s)\n", dash(r.GPUSource))
	if len(r.GPUs) == 0 {
		t.printf("  none sampled\n")
		return
	}
	t.table(func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "  GPU\tNAME\tutil p10/p50/p90\tmem util p50\tSM clock p50/min/max\tpower p50/limit\ttemp max\tPCIe tx/rx p50\tthrottle\tSTATUS")
		for _, g := range r.GPUs {
			status := "ok"
			if g.Lost != "" {
				status = "lost: " + g.Lost
			}
			rowf(tw, "  %d\t%s\t%s/%s/%s\t%s\t%s/%s/%s\t%s/%s\t%s\t%s/%s\t%s\t%s\n", g.Index, g.Name,
				pct(g.UtilP10), pct(g.UtilP50), pct(g.UtilP90), pct(g.MemUtilP50),
				mhz(g.SMClockP50), mhz(g.SMClockMin), mhzU(g.MaxSMClock), watts(g.PowerP50), watts(g.PowerLimit),
				celsius(g.TempMax), rateBytes(g.PCIeTxP50), rateBytes(g.PCIeRxP50), gpu.DescribeClockEvents(g.ClockEventReasons), status)
		}
	})
}

func (t *textWriter) facts(r *Report) {
	if o := r.Observer; o != nil {
		per := "-"
		if o.NSPerThreadSample != nil {
			per = durationNS(*o.NSPerThreadSample)
		}
		carried := ""
		if o.ThreadSamplesCarried > 0 {
			carried = fmt.Sprintf(" (%d of them carried from threads asleep since their last reading)", o.ThreadSamplesCarried)
		}
		t.printf("\nOBSERVER: gpufeed used %s of one core (%s CPU), %s per thread-sample over %d thread-samples%s; tick p50 %s, max %s; %d overruns\n",
			pct(o.CPUPercentOfCore), Duration(time.Duration(o.CPUNS)), per, o.ThreadSamples, carried,
			Duration(time.Duration(o.TickP50NS)), Duration(time.Duration(o.TickMaxNS)), o.Overruns)
		switch {
		case o.Sched == "bpf" && o.SchedMissed > 0:
			// Only a recording made when the events were counted on every
			// switch has missed events.
			t.printf("SCHEDULING: threads' run time, run-queue wait and switches from the scheduler's events, counted in the kernel; "+
				"%d switches not seen whole (the kernel skipped the counting program, or ran it for a switch-out and not the switch-in before it): each loses at most a slice and its time\n", o.SchedMissed)
		case o.Sched == "bpf":
			waits := "; where sleeping threads wait (system call, wait channel) read in the kernel too"
			switch {
			case o.Waits == "proc" && o.WaitsNotBPF != "":
				waits = "; where sleeping threads wait read from /proc (not in the kernel: " + o.WaitsNotBPF + ")"
			case o.Waits != "bpf":
				waits = ""
			}
			t.printf("SCHEDULING: threads' run time, run-queue wait and switches from the kernel's own counters (what schedstat and status show), "+
				"read for all threads at once each tick by a BPF task iterator; who woke them counted a tenth of the time, in spells%s\n", waits)
		case o.Sched == "proc" && o.SchedNotBPF != "":
			t.printf("SCHEDULING: threads' run time, run-queue wait and switches from /proc (the kernel's counters by eBPF not used: %s)\n", o.SchedNotBPF)
		case o.Sched == "proc":
			t.printf("SCHEDULING: threads' run time, run-queue wait and switches from /proc\n")
		}
	}
	c := r.Counts
	t.printf("COUNTS: %d threads and %d processes vanished mid-read (skipped); %d read errors; %d smaps_rollup reads postponed by budget\n",
		c.VanishedThreads, c.VanishedProcs, c.ReadErrors, c.RollupSkipped)
	for _, e := range r.Events {
		t.printf("EVENT at %s: %s pid %d %s\n", Duration(time.Duration(e.AtNS)), e.Kind, e.PID, e.Text)
	}
	if r.KernelLinesOther > 0 {
		t.printf("KERNEL LOG: %d lines about other processes since the job started left out (dmesg -T shows them)\n", r.KernelLinesOther)
	}
	for _, nv := range r.NotVisible {
		t.printf("NOT VISIBLE: %s %s: %s\n", nv.Subject, nv.Field, nv.Why)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
	return Bytes(*p)
}

func rateBytes(p *float64) string {
	if p == nil {
		return "-"
	}
	return Bytes(*p) + "/s"
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

func nsDur(p *float64) string {
	if p == nil {
		return "-"
	}
	return durationNS(*p)
}
