package frozen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Death is a member of the job that died, or a process the kernel killed
// that belonged to the job.
type Death struct {
	PID int
	// Cause: "oom-kill", "segfault", "trap", "exited".
	Cause string
	Kill  *kernlog.Kill
	Crash *kernlog.Event
	// When is the wall time of the kill or crash; zero when only the
	// sampler saw the process go.
	When time.Time
	// Via says how the process was tied to the job: "pid" (sampled as
	// part of the job), "memory cgroup" (killed before gpufeed saw it, in
	// the job's cgroup) or "kernel log" (killed before gpufeed saw it, and
	// matched to a missing rank).
	Via string
	// Match is the rank told by elimination for a dead process whose own
	// environment gives none (a zombie, a process gone before gpufeed
	// attached); nil when its rank is its own or none could be told.
	Match *RankMatch
}

// kernelEvents are the kernel log lines recorded in the timeline, as
// recognised once for the view.
func (v *view) kernelEvents() []kernlog.Event { return v.kernel }

// jobPIDOf maps a pid or tid named by a kernel line to the job's pid.
func (v *view) jobPIDOf(id int) (int, bool) {
	if id <= 0 {
		return 0, false
	}
	if _, ok := v.procs[id]; ok {
		return id, true
	}
	if th := v.threads[id]; th != nil {
		return th.PID, true
	}
	return 0, false
}

// jobCgroups lists the memory cgroups the job's processes live in.
func (v *view) jobCgroups() map[string]bool {
	out := map[string]bool{}
	for _, p := range v.procs {
		if p.MemCgroup != nil && p.MemCgroup.Path != "" && p.MemCgroup.Path != "/" {
			out[p.MemCgroup.Path] = true
		}
	}
	return out
}

// Deaths finds the members that died: processes of the job that the kernel
// killed or that crashed (matched by pid or tid to the kernel log), ranks
// that exited, and kills of processes gpufeed never sampled whose memory
// cgroup is the job's. Other processes that exit (helpers, shells) are
// left out.
func Deaths(v *view) []Death {
	events := v.kernelEvents()
	kills := kernlog.Kills(events)
	killByPID := map[int]*kernlog.Kill{}
	for i := range kills {
		killByPID[kills[i].PID] = &kills[i]
	}
	crashByPID := map[int]*kernlog.Event{}
	for i := range events {
		ev := &events[i]
		if ev.Kind == kernlog.Segfault || ev.Kind == kernlog.Trap {
			if pid, ok := v.jobPIDOf(ev.PID); ok && !v.beforeStart(pid, ev.Wall) {
				crashByPID[pid] = ev
			}
		}
	}
	var out []Death
	seen := map[int]bool{}
	for _, pid := range v.sortedPIDs() {
		if v.alive(pid) {
			continue
		}
		if _, sampled := v.lastProcT[pid]; !sampled && !v.procs[pid].Exited {
			continue
		}
		d := Death{PID: pid, Cause: "exited", Via: "pid"}
		if k := killByPID[pid]; k != nil && !v.beforeStart(pid, k.Wall) {
			d.Cause, d.Kill, d.When = "oom-kill", k, k.Wall
		} else if c := crashByPID[pid]; c != nil {
			d.Cause, d.Crash, d.When = string(c.Kind), c, c.Wall
		} else if _, _, ranked := rank(v.procs[pid]); !ranked && !v.maybeDeadRank(pid) {
			// Helpers come and go (a shell, a compiler, a recycled
			// worker): only a rank's plain exit leaves peers waiting.
			continue
		}
		seen[pid] = true
		out = append(out, d)
	}
	cgroups := v.jobCgroups()
	for i := range kills {
		k := &kills[i]
		if seen[k.PID] {
			continue
		}
		if _, inJob := v.procs[k.PID]; inJob {
			continue // alive (a reused pid): not this kill
		}
		if cgroups[k.TaskMemCG] || (k.MemCG != "" && underAny(k.MemCG, cgroups)) {
			out = append(out, Death{PID: k.PID, Cause: "oom-kill", Kill: k, When: k.Wall, Via: "memory cgroup"})
			seen[k.PID] = true
		}
	}
	// The dead without a rank of their own (a zombie has no environment
	// left, a reaped process no /proc entry): told by elimination.
	out = append(out, v.matchRanks(out, kills)...)
	return out
}

// beforeStart says whether a kernel line naming pid was written before
// the process now holding that pid started: the kill or crash was of an
// earlier process that had the pid (pids are reused, within seconds on a
// busy host whose pid_max is 32768), not of this one. Unknown times say no.
func (v *view) beforeStart(pid int, at time.Time) bool {
	p, m := v.procs[pid], v.tl.Meta
	if p == nil || at.IsZero() || p.Key.StartTime == 0 || m.ClockTick <= 0 || m.UptimeNS <= 0 {
		return false
	}
	// The start time is in clock ticks since boot: a tick of rounding,
	// and as much again for the uptime read at T=0.
	startT := time.Duration(p.Key.StartTime)*time.Second/time.Duration(m.ClockTick) - time.Duration(m.UptimeNS)
	slack := 2 * time.Second / time.Duration(m.ClockTick)
	return at.Sub(m.Started) < startT-slack
}

// maybeDeadRank says an exited process without a rank may be a rank that
// died before gpufeed read its environment: a zombie (never sampled alive)
// child of the live ranks' launcher, with their command.
func (v *view) maybeDeadRank(pid int) bool {
	p := v.procs[pid]
	if p == nil || !p.Exited || v.lastSampled(pid) > v.t0 {
		return false
	}
	n, ok := v.numbering()
	return ok && n.parent != 0 && p.PPID == n.parent && n.comm != "" && p.Comm == n.comm
}

// underAny says whether limit is one of the cgroups or an ancestor of one.
func underAny(limit string, cgroups map[string]bool) bool {
	for cg := range cgroups {
		if cg == limit || strings.HasPrefix(cg, strings.TrimSuffix(limit, "/")+"/") {
			return true
		}
	}
	return false
}

// peersWait summarises where the job's live ranked processes wait:
// "ranks 0-1 wait in read on pipe". Unranked processes are named by pid.
func peersWait(v *view, threads []BlockedThread, exclude int) string {
	main := map[int]BlockedThread{}
	for _, b := range threads {
		if !b.Exited && b.TID == b.PID {
			main[b.PID] = b
		}
	}
	byWait := map[string][]int{}
	unranked := map[string][]int{}
	for pid, b := range main {
		if pid == exclude {
			continue
		}
		w := b.Waits()
		if _, n, ok := rank(v.procs[pid]); ok {
			byWait[w] = append(byWait[w], n)
		} else if len(main) <= 4 {
			unranked[w] = append(unranked[w], pid)
		}
	}
	var parts []string
	for w, ranks := range byWait {
		label := "rank "
		if len(ranks) > 1 {
			label = "ranks "
		}
		verb := " waits "
		if len(ranks) > 1 {
			verb = " wait "
		}
		if w == "running" {
			parts = append(parts, label+rankRanges(ranks)+" running")
			continue
		}
		parts = append(parts, label+rankRanges(ranks)+verb+"in "+w)
	}
	if len(byWait) == 0 {
		// name unranked processes only when no rank is there to name
		for w, pids := range unranked {
			sort.Ints(pids)
			parts = append(parts, "pid "+ints(pids)+" in "+w)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// deathFindings turns deaths into findings.
func deathFindings(v *view, deaths []Death, threads []BlockedThread) []finding.Finding {
	var out []finding.Finding
	for _, d := range deaths {
		name := v.procName(d.PID)
		if d.Via == "memory cgroup" && d.Match == nil {
			name = "pid " + strconv.Itoa(d.PID) + " (" + safe(d.Kill.Comm) + "), in the job's memory cgroup,"
		}
		peers := peersWait(v, threads, d.PID)
		f := finding.Finding{ID: "member-died", Severity: finding.Critical, Supports: finding.Stalled,
			// Sources: 004 (The OOM killer)
			Subject: name}
		when := ""
		if !d.When.IsZero() {
			when = " at " + d.When.Format("15:04:05")
			f.Evidence = append(f.Evidence, finding.Evidence{What: "time of death", Text: d.When.Format("2006-01-02 15:04:05.000 MST"), Source: "kernel log"})
		}
		switch d.Cause {
		case "oom-kill":
			k := d.Kill
			holding := ""
			if k.HasMemory {
				holding = " holding " + fmtBytes(float64(k.ResidentBytes))
			}
			f.Claim = name + " was killed by the OOM killer" + when + holding
			f.Evidence = append(f.Evidence, killEvidence(k)...)
			f.Decision = oomDecision(v, k)
		case string(kernlog.Segfault), string(kernlog.Trap):
			c := d.Crash
			in := ""
			if c.Object != "" {
				in = " in " + safe(c.Object)
			}
			f.Claim = name + " crashed (" + c.Trap + in + ")" + when
			f.Evidence = append(f.Evidence, finding.Evidence{What: "kernel line", Text: safe(c.Raw), Source: "kernel log"})
			f.Decision = "Find the crashing call: enable Python's faulthandler (PYTHONFAULTHANDLER=1) and core dumps (ulimit -c unlimited), and check that the native libraries (the object named) match the interpreter and driver. Restart the job: the other members wait for it forever."
			// Sources: 004 (Common mistakes: a silently killed process)
		default:
			f.Claim = name + " exited during the window"
			f.Severity = finding.Warning
			if t, ok := v.lastProcT[d.PID]; ok {
				f.Evidence = append(f.Evidence, finding.Evidence{What: "last sampled", Text: "at " + fmtSeconds(time.Duration(t-v.t0)) + " into the window", Source: "/proc/" + strconv.Itoa(d.PID)})
			} else {
				f.Claim = name + " had exited before gpufeed attached: its parent has not reaped it (a zombie)"
				f.Evidence = append(f.Evidence, finding.Evidence{What: "state when first seen", Text: "Z (zombie)", Source: "/proc/" + strconv.Itoa(d.PID) + "/stat"})
			}
			f.Decision = "Its exit status is not visible to an observer that did not start it: read its log for the exception; the kernel log shows no kill or crash for it. If peers wait for it, restart the job."
			// Sources: 004 (Common mistakes)
		}
		if peers != "" {
			f.Claim += "; " + peers
			f.Evidence = append(f.Evidence, finding.Evidence{What: "the other members", Text: peers, Window: "at the end of the window", Source: "/proc/PID/task/TID/{wchan,syscall}"})
		}
		if m := d.Match; m != nil {
			f.Claim += "; " + m.Name() + " by elimination (" + m.Sure + ")"
			f.Evidence = append(f.Evidence, finding.Evidence{What: "how pid " + strconv.Itoa(d.PID) + " was matched to " + m.Name(), Text: m.How(),
				Source: "allowlisted /proc/PID/environ of the live ranks, /proc/PID/stat (ppid, start time), kernel log"})
		}
		out = append(out, f)
	}
	return out
}

// killEvidence lists what the kernel said about a kill.
func killEvidence(k *kernlog.Kill) []finding.Evidence {
	var ev []finding.Evidence
	if k.HasMemory {
		ev = append(ev,
			finding.Evidence{What: "resident memory at the kill (anon + file + shmem RSS)", Value: mib(k.ResidentBytes), Unit: "MiB", Source: "kernel log (Killed process line)"},
			finding.Evidence{What: "anonymous memory at the kill (anon-rss)", Value: mib(k.AnonRSSBytes), Unit: "MiB", Source: "kernel log"},
			finding.Evidence{What: "virtual size (total-vm)", Value: mib(k.TotalVMBytes), Unit: "MiB", Source: "kernel log"})
	}
	if k.Constraint != "" {
		ev = append(ev, finding.Evidence{What: "OOM constraint", Text: k.Constraint, Source: "kernel log (oom-kill line)"})
	}
	if k.MemCG != "" {
		ev = append(ev, finding.Evidence{What: "memory cgroup whose limit was hit", Text: safe(k.MemCG), Source: "kernel log"})
	}
	if k.LimitBytes > 0 {
		ev = append(ev,
			finding.Evidence{What: "memory cgroup limit", Value: mib(k.LimitBytes), Unit: "MiB", Source: "kernel log (memory: usage line)"},
			finding.Evidence{What: "memory cgroup usage at the kill", Value: mib(k.UsageBytes), Unit: "MiB", Source: "kernel log"})
	}
	if k.Trigger != "" {
		ev = append(ev, finding.Evidence{What: "task whose allocation invoked the OOM killer", Text: safe(k.Trigger), Source: "kernel log"})
	}
	if len(k.Lines) > 0 {
		ev = append(ev, finding.Evidence{What: "kernel line", Text: safe(k.Lines[len(k.Lines)-1]), Source: "kernel log"})
	}
	return ev
}

func mib(b uint64) float64 { return round(float64(b)/(1<<20), 1) }

func oomDecision(v *view, k *kernlog.Kill) string {
	_, with := v.failLoudly()
	shrink := "shrink what it holds: smaller batch or sequence length, fewer DataLoader workers, datasets in flat storage (numpy, Arrow, an mmap'd file) rather than lists of Python objects"
	restart := " Restart the job: the surviving ranks never leave the collective on their own; " + with + " they fail loudly instead."
	if k.Constraint == "CONSTRAINT_MEMCG" {
		limit := ""
		if k.LimitBytes > 0 {
			limit = " (" + fmtBytes(float64(k.LimitBytes)) + ")"
		}
		return "It hit its memory cgroup's limit" + limit + ", not the machine's: raise the job's memory limit (the scheduler's --mem, the container's limit) or " + shrink + "." + restart
	}
	return "The whole machine ran out of memory: " + shrink + ", or run fewer jobs on the host." + restart
}

// missingRanks finds node-local ranks absent from the job: processes with
// LOCAL_WORLD_SIZE=n exist but some local rank below n is not alive.
func missingRanks(v *view, deaths []Death) []finding.Finding {
	size := 0
	present := map[int]bool{}
	for pid, p := range v.procs {
		n, err := strconv.Atoi(p.Env["LOCAL_WORLD_SIZE"])
		if err != nil || n <= 0 || n > 4096 || !isRankProcess(p) {
			continue
		}
		size = max(size, n)
		if lr, err := strconv.Atoi(p.Env["LOCAL_RANK"]); err == nil && v.alive(pid) {
			present[lr] = true
		}
	}
	if size == 0 || len(present) == 0 {
		return nil
	}
	dead := map[int]bool{}
	for _, d := range deaths {
		if d.Match != nil {
			dead[d.Match.Rank] = true // told by elimination over these ranks
		} else if lr, err := strconv.Atoi(envOf(v.procs[d.PID], "LOCAL_RANK")); err == nil {
			dead[lr] = true
		}
	}
	var missing []int
	for r := range size {
		if !present[r] && !dead[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	f := finding.Finding{
		ID:       "rank-missing",
		Severity: finding.Critical,
		Claim:    fmt.Sprintf("Local rank %s of %d is not running: the others wait for it", rankRanges(missing), size),
		Evidence: []finding.Evidence{
			{What: "local ranks expected (LOCAL_WORLD_SIZE)", Value: float64(size), Source: "/proc/PID/environ (allowlisted)"},
			{What: "local ranks alive", Value: float64(len(present)), Window: "at the end of the window", Source: "/proc"},
		},
		Decision: "The missing rank died before gpufeed attached: search the kernel log over the job's whole life (`dmesg -T`, `journalctl -k --since`) for a kill or crash, and its own log for an exception; then restart the job.",
		// Sources: 004 (The OOM killer: the kernel log has no concept of rank)
		Supports: finding.Stalled,
		Subject:  "job",
	}
	// The kernel log has no ranks: a kill, since the job started, of a
	// process named like the ranks and not among the job's processes is
	// likely the missing rank.
	comms := map[string]bool{}
	for pid, p := range v.procs {
		if _, _, ok := rank(p); ok && v.alive(pid) {
			comms[p.Comm] = true
		}
	}
	var likely []string
	for _, k := range kernlog.Kills(v.kernelEvents()) {
		if _, inJob := v.jobPIDOf(k.PID); inJob || !comms[k.Comm] || explainedPID(deaths, k.PID) || v.killedAfterStart(&k) {
			continue // a process killed after the window began was never the missing rank (matchRanks)
		}
		desc := fmt.Sprintf("pid %d (%s) killed by the OOM killer", k.PID, safe(k.Comm))
		if !k.Wall.IsZero() {
			desc += " at " + k.Wall.Format("15:04:05")
		}
		if k.HasMemory {
			desc += " holding " + fmtBytes(float64(k.ResidentBytes))
		}
		likely = append(likely, desc)
		kk := k
		f.Evidence = append(f.Evidence, killEvidence(&kk)...)
	}
	if len(likely) > 0 {
		f.Claim += "; the kernel log since the job started has " + strings.Join(likely, ", ") + ": likely the missing rank (same command name; the log names no rank)"
		f.Decision = "The OOM killer most likely took the missing rank: see the kill's memory figures, raise the memory limit or shrink what the rank holds, and restart the job."
	}
	return []finding.Finding{f}
}

func explainedPID(deaths []Death, pid int) bool {
	for _, d := range deaths {
		if d.PID == pid {
			return true
		}
	}
	return false
}

func envOf(p *timeline.ProcInfo, k string) string {
	if p == nil {
		return ""
	}
	return p.Env[k]
}
