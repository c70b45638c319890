package judge

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

func init() {
	register(Rule{ID: "cpu-quota-throttled", Title: "The job's CPU limit throttles the launch thread",
		// Sources: Linux kernel documentation, CFS bandwidth control
		// (Documentation/scheduler/sched-bwc.rst: cpu.cfs_quota_us,
		// cpu.cfs_period_us, cpu.stat nr_periods, nr_throttled,
		// throttled_time) and cgroup v2 (Documentation/admin-guide/
		// cgroup-v2.rst: cpu.max, cpu.stat throttled_usec); Kubernetes,
		// "Control CPU Management Policies on the Node" (the static
		// policy's exclusive cores for Guaranteed pods).
		Run: runCPUQuota})
}

// QuotaThrottle is what the launch thread's process's CPU limit did over
// the window: cpu.stat of the cgroup that sets the quota, first to last
// slow-tier reading.
type QuotaThrottle struct {
	// Limit is the quota in CPUs; At the cgroup setting it, Version the
	// hierarchy (1 or 2).
	Limit   float64
	At      string
	Version int
	// Periods and Throttled are the enforcement periods elapsed with the
	// cgroup runnable and those in which it was throttled; ThrottledSec
	// the time its run queues spent throttled (summed over CPUs) per
	// second of wall time; Span the time between the readings.
	Periods, Throttled uint64
	ThrottledSec       float64
	SpanSec            float64
	PeriodUs           int64
}

// Pct is the share of periods throttled, in percent.
func (q QuotaThrottle) Pct() float64 {
	if q.Periods == 0 {
		return 0
	}
	return 100 * float64(q.Throttled) / float64(q.Periods)
}

// quotaThrottle reads the launch process's CPU quota and throttling from
// the timeline; ok is false when it has no quota or no two readings.
func quotaThrottle(in *Input) (q QuotaThrottle, ok bool) {
	launchThread := in.Job.Launch
	if launchThread == nil || launchThread.Proc == nil || launchThread.Proc.Info == nil || launchThread.Proc.Info.Cgroup == nil {
		return q, false
	}
	cg := launchThread.Proc.Info.Cgroup
	if cg.CPULimit() <= 0 {
		return q, false
	}
	pid := launchThread.Proc.Key.PID
	var first, last *struct {
		t         int64
		p, th, ns uint64
	}
	for _, tk := range in.Timeline.Ticks {
		for _, ps := range tk.Procs {
			if ps.PID != pid || ps.Cgroup == nil || ps.Cgroup.CPU == nil {
				continue
			}
			c := ps.Cgroup.CPU
			r := &struct {
				t         int64
				p, th, ns uint64
			}{tk.T, c.NrPeriods, c.NrThrottled, c.ThrottledNs}
			if first == nil {
				first = r
			}
			last = r
		}
	}
	if first == nil || last == first || last.t <= first.t || last.p < first.p || last.th < first.th {
		return q, false
	}
	q = QuotaThrottle{Limit: cg.CPULimit(), At: cg.CPULimitAt, Version: cg.CPUVersion, PeriodUs: cg.CPUPeriodUs,
		Periods: last.p - first.p, Throttled: last.th - first.th, SpanSec: float64(last.t-first.t) / 1e9}
	if last.ns >= first.ns {
		q.ThrottledSec = float64(last.ns-first.ns) / 1e9 / q.SpanSec
	}
	return q, true
}

// throttledLaunch says the quota throttled the launch thread's process
// enough to be named: throttled in QuotaThrottledPct of at least
// QuotaMinPeriods periods, while the launch thread waited for a CPU at
// least LaunchWaitPct of the time (a throttled thread is runnable, not
// running: schedstat counts the wait as run-queue time).
func throttledLaunch(in *Input) (QuotaThrottle, bool) {
	q, ok := throttledCgroup(in)
	launchThread := in.Job.Launch
	if !ok || launchThread.T.Wait.N == 0 || launchThread.T.Wait.Mean < thresholds.LaunchWaitPct {
		return q, false
	}
	return q, true
}

// throttledCgroup says the quota throttled the launch thread's process in
// QuotaThrottledPct of at least QuotaMinPeriods periods, whatever that
// cost the launch thread.
func throttledCgroup(in *Input) (QuotaThrottle, bool) {
	q, ok := quotaThrottle(in)
	if !ok || q.Periods < thresholds.QuotaMinPeriods || q.Pct() < thresholds.QuotaThrottledPct {
		return q, false
	}
	return q, true
}

// fmtCPUs writes a CPU count as a person reads it: "0.6", "2", "1.25".
func fmtCPUs(x float64) string {
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

// quotaClaim is the verdict's first line for a throttled launch thread.
func quotaClaim(in *Input, q QuotaThrottle) string {
	th := in.Job.Launch.T
	return fmt.Sprintf("%s is throttled in %.0f%% of periods by its %s-CPU limit (cgroup %s): it waited for a CPU %.0f%% of the time and ran %.0f%%",
		in.launchRef(), q.Pct(), fmtCPUs(q.Limit), safeText(q.At), th.Wait.Mean, nanZero(th.CPU.Mean))
}

// jobDemand is the job's CPU demand: the sum over its threads of their mean
// share running or runnable, in CPUs.
func jobDemand(in *Input) float64 {
	d := 0.0
	for _, p := range in.Job.Procs {
		for _, th := range p.Threads {
			if th.CPU.N > 0 {
				d += (nanZero(th.CPU.Mean) + nanZero(th.Wait.Mean)) / 100
			}
		}
	}
	return d
}

func runCPUQuota(in *Input) []finding.Finding {
	q, ok := throttledCgroup(in)
	if !ok || in.Job.Launch.T.Wait.N == 0 {
		return nil
	}
	th := in.Job.Launch.T
	f := finding.Finding{ID: "cpu-quota-throttled", Severity: in.impact(), Supports: finding.SubmissionBound, Subject: threadSubject(th),
		Claim: quotaClaim(in, q)}
	switch {
	case th.Wait.Mean < thresholds.LaunchWaitPct && in.Job.GPUProcsAssumed:
		// No GPU in view and the thread taken as the launch thread seldom
		// waited: what the limit costs a GPU is not known; what it costs
		// the job is its demand against the limit.
		f.Severity, f.Supports = finding.Info, ""
		demand := fmtCPUs(jobDemand(in)) + " CPUs"
		if demand == "1 CPUs" {
			demand = "1 CPU"
		}
		f.Claim += fmt.Sprintf("; what the limit costs a GPU is not known, but the job's threads wanted %s (running or waiting to run) against the %s it gives",
			demand, fmtCPUs(q.Limit))
	case th.Wait.Mean < thresholds.LaunchWaitPct:
		// Throttled, but the launch thread was seldom held off a CPU (it
		// slept through most throttled spells, or they were short): the
		// limit costs the GPU under LaunchWaitPct now, so it leads
		// nothing; the fact is said, since a little more CPU work per
		// step makes it the cause.
		f.Severity, f.Supports = finding.Info, ""
		f.Claim += fmt.Sprintf("; a wait under %.0f%% costs the GPU little, so the limit is not what idles it now, but it binds: a little more CPU work per step and it will", thresholds.LaunchWaitPct)
	default:
		f.Claim += waitOnTheGPU(in)
	}
	window := fmt.Sprintf("first to last slow-tier reading (%.1f s)", q.SpanSec)
	stat := "cpu.stat nr_periods, nr_throttled"
	timeField := "throttled_usec"
	limitFiles := "cpu.max"
	if q.Version == 1 {
		timeField, limitFiles = "throttled_time", "cpu.cfs_quota_us / cpu.cfs_period_us"
	}
	src := "cgroup " + safeText(q.At) + " "
	demand := jobDemand(in)
	f.Evidence = append(f.Evidence,
		ev("CPU limit (CFS bandwidth quota per period)", q.Limit, "CPUs", "read every few seconds", src+limitFiles),
		ev("periods throttled", q.Pct(), "% of periods", fmt.Sprintf("%d of %d periods of %d µs, %s", q.Throttled, q.Periods, q.PeriodUs, window), src+stat),
		ev("time throttled (summed over CPUs)", q.ThrottledSec, "s per s", window, src+"cpu.stat "+timeField),
		ev("launch thread waiting for a CPU (run queue, throttled time included), mean", th.Wait.Mean, "% of wall time", in.window(th.Wait.N), in.schedSource(th)),
		ev("launch thread running", nanZero(th.CPU.Mean), "% of wall time", in.window(th.CPU.N), in.schedSource(th)),
		ev("the job's threads running or runnable (its CPU demand)", demand, "CPUs", in.window(th.CPU.N), "/proc/PID/task/TID/schedstat, summed"))
	f.Decision = fmt.Sprintf("Raise the CPU limit above the job's demand (%s CPUs here, the limit is %s) or drop it: in Kubernetes set a CPU request without a limit, "+
		"or run a Guaranteed pod (integer CPU request equal to its limit) on nodes with the kubelet's static CPU manager policy so the launch thread gets exclusive cores; "+
		"fewer intra-op threads (OMP_NUM_THREADS, torch.set_num_threads) spend less of the quota beside it; CUDA graphs make it need the CPU far less often.",
		fmtCPUs(demand), fmtCPUs(q.Limit))
	return []finding.Finding{f}
}

// quotaVerdict: while the launch thread's CPU limit throttles it and the
// GPU waits, the idle time that passed while the launch thread was on a
// CPU or waiting for one (submission, and the spin that cannot be told
// from it) is the limit's: a throttled thread is runnable, not running, so
// schedstat counts the throttled time as its run-queue wait, which the
// attribution gives to submission. The verdict is submission-bound, led by
// the limit, when that share leads the idle split. Time the thread slept
// on the device is not the limit's (a sleeping thread spends no quota):
// when synchronisation or another cause leads, ok is false and note names
// the limit beside that verdict.
func quotaVerdict(in *Input, fs []finding.Finding) (v finding.Verdict, note string, ok bool) {
	var cause *finding.Finding
	for i := range fs {
		if fs[i].ID == "cpu-quota-throttled" && fs[i].Severity >= finding.Warning {
			cause = &fs[i]
		}
	}
	at := in.Attribution
	if cause == nil || at.IdlePct <= 0 {
		return v, "", false
	}
	q, _ := throttledLaunch(in)
	note = fmt.Sprintf("; its %s-CPU limit also throttled it in %.0f%% of periods (cpu-quota-throttled)", fmtCPUs(q.Limit), q.Pct())
	cpuSide := at.Share[finding.SubmissionBound] + at.Share[SpinOrSubmit]
	if cpuSide < thresholds.ModerateSharePct || cpuSide < at.Share[Unexplained] {
		return v, note, false
	}
	for _, c := range finding.Classes {
		if c != finding.SubmissionBound && at.Share[c] > cpuSide {
			return v, note, false
		}
	}
	conf := cpuSide / at.IdlePct * at.Coverage()
	v = verdictFor(finding.SubmissionBound, conf, fs, "")
	v.Because = append([]string{cause.ID}, slices.DeleteFunc(v.Because, func(id string) bool { return id == cause.ID })...)
	v.Summary = fmt.Sprintf("%s: the GPU idled %.0f%% of the window, %.0f%% while its launch thread was on a CPU or held off one", cause.Claim, at.IdlePct, cpuSide)
	v.Decision = cause.Decision
	v.Basis = fmt.Sprintf("the launch thread's time on a CPU or throttled off one (submission, or a spin that cannot be told from it) explains %.0f%% of the GPU's idle time, × %.0f%% of the intervals with the GPU read",
		cpuSide/at.IdlePct*100, at.Coverage()*100)
	return v, "", true
}
