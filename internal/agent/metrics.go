package agent

import (
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// The labels of every per-job series. Hostname, gpu, UUID and pci_bus_id
// are dcgm-exporter's names and values for the same GPU, so the two join
// (on(UUID) or on(Hostname, gpu)); pid and comm name the job's root
// process; slurm_job_id, pod_uid and container_id the scheduler's job.
// A job using several GPUs has one series per GPU, each carrying the
// job's values (a job's numbers are not split between its GPUs).
var jobLabels = []string{"Hostname", "gpu", "UUID", "pci_bus_id", "pid", "comm", "slurm_job_id", "pod_uid", "container_id", "namespace", "pod", "container"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string(nil), jobLabels...), extra...), nil)
}

var (
	descStarved = desc("gpufeed_gpu_starved_seconds_total",
		"Time the job's GPU was idle, by what the judgement attributes it to (cause: a bottleneck class; stalled or idle when the job did not progress or waited for requests; unexplained when no cause was measured).", "cause")
	descObserved = desc("gpufeed_gpu_observed_seconds_total",
		"Time the job's GPU utilisation was measured: the denominator of the starved seconds.")
	descVerdict = desc("gpufeed_job_verdict_info",
		"The last judged window's verdict (verdict: the bottleneck class, gpu-bound when the GPU is fed, stalled, idle or inconclusive).", "verdict")
	descConfidence = desc("gpufeed_job_verdict_confidence",
		"Confidence of the last verdict, 0 to 1: the share of the evidence that points to its class.")
	descJudged = desc("gpufeed_job_last_judged_timestamp_seconds",
		"When the job's last window was judged (Unix time).")
	descWindows = desc("gpufeed_job_windows_total",
		"Windows of the job sampled and judged.")
	descRunq = desc("gpufeed_launch_thread_runqueue_wait_seconds_total",
		"Time the job's launch thread (the one that submits work to the GPU) was runnable but waiting for a CPU (schedstat run-queue wait).")
	descDeaths = desc("gpufeed_member_deaths_total",
		"Members of the job that died (cause: oom-kill, segfault, trap from the kernel log; exited for a rank that ended), each counted once.", "cause")
	descUp = desc("gpufeed_job_watched",
		"1 while the job is watched, 0 once it ended (its ring stays readable until it ages out).")
	descRingBytes = desc("gpufeed_job_ring_bytes",
		"Compressed size of the job's ring of recorded windows.")
	descRingSeconds = desc("gpufeed_job_ring_seconds",
		"Time the job's ring of recorded windows covers.")

	descCOWCopied = desc("gpufeed_worker_cow_copied_bytes",
		"Memory the job's forked worker processes (DataLoader workers started by fork) hold as private copies of their parent's memory: copy-on-write, their Private_Dirty in the anonymous mappings they share with it (smaps), summed over the workers, at the end of the last window. Absent when no forked worker was read.")

	descStraggler = desc("gpufeed_rank_straggler",
		"The rank of the job its other ranks waited for in a collective over the last window (rank, and rank_pid its process), while it alone ran its own work, waited for its input or slept: the job runs at its pace. The value is the smallest share of the window, 0 to 1, another rank spent waiting for it. Absent when no straggler was named.", "rank", "rank_pid")

	descCheck = prometheus.NewDesc("gpufeed_platform_check_status",
		"A platform check's outcome (status: ok, warn, fail, absent, not-visible, error), 1 for the current one.",
		[]string{"Hostname", "check", "subject", "status"}, nil)
	descProbeOK = prometheus.NewDesc("gpufeed_probe_success",
		"Whether the probe's last run succeeded (1) or failed (0); a failing probe leaves the rest running.", []string{"probe"}, nil)
	descProbeDur = prometheus.NewDesc("gpufeed_probe_duration_seconds",
		"How long the probe's last run took.", []string{"probe"}, nil)
	descProbeFail = prometheus.NewDesc("gpufeed_probe_failures_total",
		"Runs of the probe that failed.", []string{"probe"}, nil)
	descJobs = prometheus.NewDesc("gpufeed_jobs",
		"GPU process trees found (state: watched, ended, not_watched past the cap on jobs).", []string{"state"}, nil)
	descConns = prometheus.NewDesc("gpufeed_http_connections",
		"Connections open to the agent's HTTP listener (listener: tcp, or unix for the detail socket).", []string{"listener"}, nil)
	descConnsMax = prometheus.NewDesc("gpufeed_http_connections_max",
		"The cap on the listener's open connections.", []string{"listener"}, nil)
	descConnsShed = prometheus.NewDesc("gpufeed_http_connections_shed_total",
		"Connections closed as soon as accepted because the listener's cap was reached.", []string{"listener"}, nil)
)

// Describe sends every metric's description.
func (a *Agent) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStarved, descObserved, descVerdict, descConfidence, descJudged, descWindows,
		descRunq, descDeaths, descUp, descRingBytes, descRingSeconds, descCOWCopied, descStraggler, descCheck, descProbeOK, descProbeDur, descProbeFail, descJobs,
		descConns, descConnsMax, descConnsShed} {
		ch <- d
	}
	for _, d := range cgroupDescs {
		ch <- d
	}
}

// Collect reads what the agent last concluded. Nothing is measured during
// a scrape: the probes ran before it and left their results, so a slow or
// failing probe never slows or fails a scrape.
func (a *Agent) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	jobs := make([]*job, 0, len(a.jobs))
	for _, j := range a.jobs {
		jobs = append(jobs, j)
	}
	checks := append(a.checks[:0:0], a.checks...)
	type probe struct {
		name string
		p    probeState
	}
	var probes []probe
	for n, p := range a.probes {
		probes = append(probes, probe{n, *p})
	}
	notWatched := a.notWatched
	listeners := a.listeners
	a.mu.Unlock()
	for _, l := range listeners {
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(l.limit.Open()), l.name)
		ch <- prometheus.MustNewConstMetric(descConnsMax, prometheus.GaugeValue, float64(l.limit.Max()), l.name)
		ch <- prometheus.MustNewConstMetric(descConnsShed, prometheus.CounterValue, float64(l.limit.Shed()), l.name)
	}
	var devs []gpu.DeviceInfo
	if a.gpu != nil {
		devs = a.gpu.Devices()
	}
	host := a.cfg.Hostname

	watched, ended := 0, 0
	for _, j := range jobs {
		j.mu.Lock()
		if j.done {
			ended++
		} else {
			watched++
		}
		for _, lv := range j.labelSets(host, devs) {
			counter := func(d *prometheus.Desc, v float64, extra ...string) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(lv, extra...)...)
			}
			gauge := func(d *prometheus.Desc, v float64, extra ...string) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(lv, extra...)...)
			}
			up := 1.0
			if j.done {
				up = 0
			}
			gauge(descUp, up)
			counter(descWindows, float64(j.windows))
			counter(descObserved, j.observed)
			counter(descRunq, j.runqWait)
			collectCgroup(j.cgroup, gauge, counter)
			for _, c := range sortedKeys(j.starved) {
				counter(descStarved, j.starved[c], c)
			}
			for _, c := range deathCauses(j.deaths) {
				counter(descDeaths, j.deaths[c], c)
			}
			if j.verdict != nil && !j.done {
				gauge(descVerdict, 1, string(j.verdict.Class))
				gauge(descConfidence, j.verdict.Confidence)
				gauge(descJudged, float64(j.judgedAt.UnixNano())/1e9)
			}
			if j.cowCopied != nil && !j.done {
				gauge(descCOWCopied, *j.cowCopied)
			}
			if s := j.straggler; s != nil && !j.done {
				gauge(descStraggler, s.wait, safetext.Clean(s.rank), strconv.Itoa(s.pid))
			}
			gauge(descRingBytes, float64(j.ringLen))
			secs := 0.0
			for _, c := range j.ring {
				secs += c.seconds
			}
			gauge(descRingSeconds, secs)
		}
		j.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(watched), "watched")
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(ended), "ended")
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(notWatched), "not_watched")

	seen := map[string]bool{}
	for _, c := range checks {
		id := safetext.Clean(check.SubjectID(c.Subject))
		k := c.ID + "\x00" + id
		if seen[k] {
			continue // one series per check and subject
		}
		seen[k] = true
		ch <- prometheus.MustNewConstMetric(descCheck, prometheus.GaugeValue, 1, host, c.ID, id, string(c.Status))
	}
	sort.Slice(probes, func(i, j int) bool { return probes[i].name < probes[j].name })
	for _, p := range probes {
		ok := 0.0
		if p.p.ok {
			ok = 1
		}
		ch <- prometheus.MustNewConstMetric(descProbeOK, prometheus.GaugeValue, ok, p.name)
		ch <- prometheus.MustNewConstMetric(descProbeDur, prometheus.GaugeValue, p.p.duration.Seconds(), p.name)
		ch <- prometheus.MustNewConstMetric(descProbeFail, prometheus.CounterValue, float64(p.p.failures), p.name)
	}
}

// labelSets are the job's label values, one set per GPU it uses (j.mu held).
// The names that come from outside (the process's comm, which the job
// sets; the pod's names, from the runtime's records) pass through
// safetext.Clean: Prometheus's text format escapes only backslash, quote
// and newline in a label value, so an escape sequence or a bidirectional
// override would reach the terminal of whoever curls /metrics.
func (j *job) labelSets(host string, devs []gpu.DeviceInfo) [][]string {
	c := safetext.Clean
	base := func(g, uuid, bus string) []string {
		return []string{c(host), g, uuid, bus, strconv.Itoa(j.key.PID), c(j.comm), j.id.SlurmJobID, j.id.PodUID, j.id.ContainerID, c(j.id.Namespace), c(j.id.Pod), c(j.id.Container)}
	}
	if len(j.devices) == 0 {
		return [][]string{base("", "", "")}
	}
	var out [][]string
	for _, d := range j.devices {
		g, uuid, bus := strconv.Itoa(d), "", ""
		for _, info := range devs {
			if info.Index == d {
				uuid, bus = info.UUID, dcgmBusID(info.BusID)
			}
		}
		if j.byNode {
			// Known by its /dev/nvidiaN node: N is the device's minor
			// number, which NVML's index need not equal; the UUID is
			// what joins then, and it is not known here.
			g, uuid, bus = strconv.Itoa(d), "", ""
		}
		out = append(out, base(g, uuid, bus))
	}
	return out
}

// dcgmBusID writes a sysfs PCI address (0000:81:00.0) as NVML and
// dcgm-exporter's pci_bus_id do (00000000:81:00.0, upper case).
func dcgmBusID(bus string) string {
	if bus == "" {
		return ""
	}
	dom, rest, ok := strings.Cut(bus, ":")
	if !ok || strings.Count(rest, ":") != 1 {
		return strings.ToUpper(bus)
	}
	for len(dom) < 8 {
		dom = "0" + dom
	}
	return strings.ToUpper(dom + ":" + rest)
}

// knownDeathCauses are exported from a job's start at 0, so that the
// first death is an increase a rule sees (a counter born at 1 is not).
var knownDeathCauses = []string{"exited", "oom-kill", "segfault", "trap"}

func deathCauses(m map[string]float64) []string {
	out := append([]string(nil), knownDeathCauses...)
	for _, k := range sortedKeys(m) {
		if !containsString(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ensure the agent is a collector
var _ prometheus.Collector = (*Agent)(nil)
