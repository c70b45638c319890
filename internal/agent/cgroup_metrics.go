package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The job's cgroup limits and counters, under gpufeed_ names that say which
// cAdvisor metric each mirrors, so dashboards built on cAdvisor's read the
// same quantities: the cgroup's own cumulative counters (since the cgroup
// was made), as the kernel keeps them, read at the job's last window.

var (
	descCgPeriods = desc("gpufeed_cgroup_cpu_periods_total",
		"CFS bandwidth periods elapsed with the job's CPU-limiting cgroup runnable (cpu.stat nr_periods; mirrors cAdvisor's container_cpu_cfs_periods_total).")
	descCgThrottledPeriods = desc("gpufeed_cgroup_cpu_throttled_periods_total",
		"Periods in which the job's CPU-limiting cgroup was throttled (cpu.stat nr_throttled; mirrors container_cpu_cfs_throttled_periods_total).")
	descCgThrottledSeconds = desc("gpufeed_cgroup_cpu_throttled_seconds_total",
		"Time the job's CPU-limiting cgroup's run queues were throttled, summed over CPUs (cpu.stat throttled_usec or throttled_time; mirrors container_cpu_cfs_throttled_seconds_total).")
	descCgQuota = desc("gpufeed_cgroup_cpu_quota_cpus",
		"The job's CPU limit in CPUs: quota over period (cpu.max, cpu.cfs_quota_us/cpu.cfs_period_us; cAdvisor's container_spec_cpu_quota / container_spec_cpu_period). Absent without a limit.")
	descCgMemLimit = desc("gpufeed_cgroup_memory_limit_bytes",
		"The job's tightest memory cgroup limit (memory.max, memory.limit_in_bytes; mirrors container_spec_memory_limit_bytes). Absent without a limit.")
	descCgMemUsage = desc("gpufeed_cgroup_memory_usage_bytes",
		"Memory use of the cgroup setting the job's memory limit (memory.current, memory.usage_in_bytes; mirrors container_memory_usage_bytes).")
	descCgMemAnon = desc("gpufeed_cgroup_memory_anon_bytes",
		"Its anonymous memory (memory.stat anon, v1 total_rss; mirrors container_memory_rss).")
	descCgMemCache = desc("gpufeed_cgroup_memory_cache_bytes",
		"Its page cache, reclaimable before an OOM kill (memory.stat file, v1 total_cache; mirrors container_memory_cache).")
	descCgOOMKills = desc("gpufeed_cgroup_oom_kills_total",
		"Processes the cgroup's OOM killer killed (memory.events oom_kill, v1 memory.oom_control oom_kill; mirrors container_oom_events_total).")
)

var cgroupDescs = []*prometheus.Desc{descCgPeriods, descCgThrottledPeriods, descCgThrottledSeconds, descCgQuota,
	descCgMemLimit, descCgMemUsage, descCgMemAnon, descCgMemCache, descCgOOMKills}

// cgroupSnap is the job's cgroups at its last window: the target's limits
// and its last counters; nil parts were not read.
type cgroupSnap struct {
	info   *timeline.Cgroup
	sample *timeline.CgroupSample
}

// lastCgroup finds pid's cgroup facts and last counters in a window.
func lastCgroup(tl *timeline.Timeline, pid int) cgroupSnap {
	var s cgroupSnap
	for k, p := range tl.Procs {
		if k.PID == pid && p.Cgroup != nil {
			s.info = p.Cgroup
		}
	}
	for i := len(tl.Ticks) - 1; i >= 0 && s.sample == nil; i-- {
		for _, ps := range tl.Ticks[i].Procs {
			if ps.PID == pid && ps.Cgroup != nil {
				c := *ps.Cgroup
				s.sample = &c
				break
			}
		}
	}
	return s
}

// collectCgroup sends the job's cgroup series (j.mu held).
func collectCgroup(s cgroupSnap, gauge, counter func(d *prometheus.Desc, v float64, extra ...string)) {
	if s.info != nil {
		if q := s.info.CPULimit(); q > 0 {
			gauge(descCgQuota, q)
		}
		if s.info.MemMax != nil {
			gauge(descCgMemLimit, float64(*s.info.MemMax))
		}
	}
	if s.sample == nil {
		return
	}
	if c := s.sample.CPU; c != nil {
		counter(descCgPeriods, float64(c.NrPeriods))
		counter(descCgThrottledPeriods, float64(c.NrThrottled))
		counter(descCgThrottledSeconds, float64(c.ThrottledNs)/1e9)
	}
	if m := s.sample.Mem; m != nil {
		gauge(descCgMemUsage, float64(m.Usage))
		if m.Anon != nil {
			gauge(descCgMemAnon, float64(*m.Anon))
		}
		if m.File != nil {
			gauge(descCgMemCache, float64(*m.File))
		}
		if m.Events {
			counter(descCgOOMKills, float64(m.OOMKill))
		}
	}
}
