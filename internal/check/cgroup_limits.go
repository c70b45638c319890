package check

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// busyThreadShare: a thread that ran at least this share of the check's
// window is busy: it wants a CPU of its own.
const busyThreadShare = 0.5

var cgroupLimitsCheck = Check{
	ID:    "cgroup-limits",
	Title: "The job's cgroup limits (CPU quota, cpuset, memory, pids) beside the host's",
	// Sources: Linux kernel documentation, Control Group v2 (cpu.max,
	// cpuset.cpus.effective, memory.max, memory.high, pids.max) and
	// cgroup v1 (cpu.cfs_quota_us, cpu.cfs_period_us, memory.limit_in_bytes);
	// Documentation/scheduler/sched-bwc.rst; Kubernetes "Control CPU
	// Management Policies on the Node".
	run: runCgroupLimits,
}

// threadTicks reads each thread's time running or runnable of pid
// (schedstat's run and run-queue wait, ns): a thread throttled by a quota
// or crowded out still wants its CPU.
func (e *env) threadTicks(pid int) map[int]uint64 {
	dir := e.fs.PidPath(pid, "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[int]uint64{}
	for _, d := range ents {
		tid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, d.Name(), "schedstat")); err == nil {
			var st procfs.Schedstat
			if procfs.ParseSchedstat(b, &st) == nil {
				out[tid] = st.RunNS + st.WaitNS
			}
		}
	}
	return out
}

// cgroupThreads is the target's threads' CPU time at the first reading.
type cgroupThreads struct {
	ticks map[int]uint64
	at    time.Time
	cg    *procfs.Cgroup
	lim   procfs.CgroupLimits
	k0    procfs.CgroupCounters
}

func (e *env) firstCgroupReadings() {
	if e.opts.PID <= 0 {
		return
	}
	c := &cgroupThreads{ticks: e.threadTicks(e.opts.PID), at: time.Now()}
	if cg, err := e.fs.Cgroups(e.opts.PID); err == nil {
		c.cg = &cg
		c.lim = cg.Limits()
		c.k0 = cg.Counters(c.lim)
	}
	e.cgThreads = c
}

func runCgroupLimits(e *env) []Outcome {
	if e.opts.PID <= 0 {
		return noTarget()
	}
	src := procFile(pidDir(e.opts.PID), "cgroup")
	cg, err := e.fs.Cgroups(e.opts.PID)
	if err != nil {
		return []Outcome{readFailure(e.subjectPID(), "cgroups", src, err,
			"a cgroup file system mounted where gpufeed runs (/sys/fs/cgroup; in a container, mount it read-only)", "read access to /proc/PID/cgroup")}
	}
	l := cg.Limits()
	k := cg.Counters(l)
	var ev []finding.Evidence
	hostCPUs := 0
	if cpus, err := e.cpuList(); err == nil {
		for _, c := range cpus {
			if c.Online == nil || *c.Online {
				hostCPUs++
			}
		}
	}
	ev = append(ev, text("cgroup version", cg.Mode, src+" + "+procFile("self", "mountinfo")))
	if hostCPUs > 0 {
		ev = append(ev, num("host CPUs online", float64(hostCPUs), "CPUs", "/sys/devices/system/cpu/cpu*/online"))
	}
	quota := l.CPULimit()
	if cg.CPU != nil {
		files := "cpu.max"
		if cg.CPU.Version == 1 {
			files = "cpu.cfs_quota_us / cpu.cfs_period_us"
		}
		if quota > 0 {
			ev = append(ev, num("CPU quota", quota, "CPUs", "cgroup "+l.CPULimitAt+" "+files))
		} else {
			ev = append(ev, text("CPU quota", "none", "cgroup "+cg.CPU.Dir+" "+files+" (and its parents)"))
		}
	}
	if l.CPUSet != "" {
		if s, err := cpuset.Parse(l.CPUSet); err == nil {
			ev = append(ev, text("cpuset (effective)", fmt.Sprintf("%s (%d CPUs)", l.CPUSet, len(s)), "cgroup "+cg.CPUSet.Dir+" cpuset"))
		}
	}
	if mi, err := e.memInfo(); err == nil && mi.MemTotal != nil {
		ev = append(ev, bytesEv("host memory (MemTotal)", *mi.MemTotal, procFile("meminfo")))
	}
	if l.MemMax != nil {
		ev = append(ev, bytesEv("memory limit", *l.MemMax, "cgroup "+l.MemLimitAt))
	} else if cg.Memory != nil {
		ev = append(ev, text("memory limit", "none", "cgroup "+cg.Memory.Dir+" (and its parents)"))
	}
	if l.MemHigh != nil {
		ev = append(ev, bytesEv("memory.high", *l.MemHigh, "cgroup "+cg.Memory.Dir))
	}
	if k.HaveMem {
		ev = append(ev, bytesEv("memory usage", k.MemUsage, "cgroup "+l.MemoryDir))
	}
	if k.HaveStat {
		ev = append(ev, bytesEv("anonymous memory", k.Anon, "cgroup memory.stat"), bytesEv("page cache (reclaimable)", k.File, "cgroup memory.stat"))
	}
	if k.OOMKill > 0 {
		ev = append(ev, num("OOM kills in the cgroup (since it was made)", float64(k.OOMKill), "processes", "cgroup memory.events / memory.oom_control oom_kill"))
	}
	if l.PidsMax != nil {
		ev = append(ev, num("pids limit", float64(*l.PidsMax), "tasks", "cgroup "+l.PidsDir+" pids.max"))
	}
	if k.HavePids {
		ev = append(ev, num("tasks in the cgroup", float64(k.PidsCurrent), "tasks", "cgroup pids.current"))
	}
	for _, nv := range procfs.SortedNotVisible(l.NotVisible) {
		ev = append(ev, text("not read", nv, "cgroup"))
	}
	// The job's busy threads over the check's window.
	busy, window := -1, time.Duration(0)
	if c := e.cgThreads; c != nil && c.ticks != nil && e.opts.Window > 0 {
		window = time.Since(c.at)
		now := e.threadTicks(e.opts.PID)
		busy = 0
		for tid, t1 := range now {
			if t0, ok := c.ticks[tid]; ok && t1 >= t0 && float64(t1-t0)/1e9 >= busyThreadShare*window.Seconds() {
				busy++
			}
		}
		ev = append(ev, num("busy threads of the target (running or runnable at least half the window)", float64(busy), "threads",
			procFile(pidDir(e.opts.PID), "task", "*", "schedstat")+fmt.Sprintf(" run + run-queue wait over %.1f s", window.Seconds())))
		if c.cg != nil && k.NrPeriods >= c.k0.NrPeriods && k.NrPeriods > c.k0.NrPeriods {
			dp, dt := k.NrPeriods-c.k0.NrPeriods, k.NrThrottled-c.k0.NrThrottled
			ev = append(ev, num("periods throttled over the window", 100*float64(dt)/float64(dp), "%", fmt.Sprintf("cgroup cpu.stat (%d of %d periods)", dt, dp)))
		}
	}
	claim := fmt.Sprintf("cgroup %s: CPU quota %s, memory limit %s", cg.Mode, cpusText(quota, hostCPUs), memText(l.MemMax))
	if quota > 0 && busy > 0 && quota < float64(busy) {
		return []Outcome{{Status: Warn, Subject: e.subjectPID(), Evidence: ev, Supports: finding.SubmissionBound,
			Claim: fmt.Sprintf("the job's CPU quota is %s CPUs, below its %d busy threads: the kernel throttles them every period, launch thread included", strconv.FormatFloat(quota, 'f', -1, 64), busy),
			Decision: "Raise the CPU limit to at least the busy threads, or drop it (a CPU request without a limit; a Guaranteed pod with the static CPU manager policy for exclusive cores); " +
				"or run fewer intra-op threads (OMP_NUM_THREADS, torch.set_num_threads) so they fit the quota."}}
	}
	return []Outcome{{Status: OK, Subject: e.subjectPID(), Evidence: ev, Claim: claim}}
}

func cpusText(q float64, host int) string {
	if q <= 0 {
		return "none"
	}
	s := strconv.FormatFloat(q, 'f', -1, 64) + " CPUs"
	if host > 0 {
		s += fmt.Sprintf(" of the host's %d", host)
	}
	return s
}

func memText(m *uint64) string {
	if m == nil {
		return "none"
	}
	return human(*m)
}
