// The diagnose and report commands' report model, built from a timeline,
// its derived view and (when rules ran) a verdict and findings, and its
// renderers (text, json). Build decides everything that is shown; renderers
// only format, so every output says the same thing.

package render

import (
	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Report is what diagnose and report print.
type Report struct {
	// Header is set by the command that writes the report.
	Header Header `json:"-"`
	// RecordedBy is the gpufeed that sampled the window (a recording
	// judged later may come from another version).
	RecordedBy string  `json:"recorded_by"`
	Target     Target  `json:"target"`
	Window     Window  `json:"window"`
	Machine    Machine `json:"machine"`

	// Verdict is nil when no rules ran.
	// (JSON writes both as the shared finding view: jsonout.go.)
	Verdict  *finding.Verdict  `json:"-"`
	Findings []finding.Finding `json:"-"`

	Processes []Process `json:"processes"`
	Host      *Host     `json:"host,omitempty"`
	GPUSource string    `json:"gpu_source"`
	GPUs      []GPU     `json:"gpus"`

	Observer   *Observer    `json:"observer,omitempty"`
	Counts     Counts       `json:"counts"`
	NotVisible []NotVisible `json:"not_visible"`
	Events     []Event      `json:"events"`
	// KernelLinesOther counts the kernel log lines read for triage that
	// concern neither the job's processes nor a GPU, left out of Events.
	KernelLinesOther int `json:"kernel_lines_other"`
	// Notes are warnings about the data itself (a truncated recording).
	Notes []string `json:"notes"`
	// CPUProfile is where the job's threads spent their CPU (absent when
	// not taken: the notes say why).
	CPUProfile *profile.CPUProfile `json:"cpu_profile,omitempty"`
	// Syscalls is the job's syscall summary and DriverCalls its CUDA driver
	// calls (absent when not taken: the notes say why).
	Syscalls    *profile.SyscallSummary `json:"syscalls,omitempty"`
	DriverCalls *profile.DriverCalls    `json:"driver_calls,omitempty"`

	// View is the derived view the report was built from (its timeline
	// included): the timeline renderers (Perfetto) draw it over time.
	View *derive.View `json:"-"`
	// Series is what the verdict was judged from, interval by interval
	// (nil when no rules ran): the HTML report draws it, with the
	// intervals each cause took shaded.
	Series *judge.Series `json:"-"`

	// Job is the job as the judge saw it: its launch thread and its
	// members (nil when no rules ran). KernelEvents are the kernel log
	// lines the judge recognised, Deaths the members that died; each is
	// the judge's, carried as it is (compare reads them back).
	Job          *judge.JobJudged    `json:"job"`
	KernelEvents []judge.KernelEvent `json:"kernel_events"`
	Deaths       []judge.Death       `json:"deaths"`
}

// Target is what was observed.
type Target struct {
	PID      int      `json:"pid"`
	Comm     string   `json:"comm"`
	Command  []string `json:"command,omitempty"`
	Launched bool     `json:"launched"`
	// Held: the launched command was held before its execve until the
	// window's first reading, so its start-up is in the window.
	Held     bool `json:"held,omitempty"`
	ExitCode *int `json:"exit_code,omitempty"`
}

// Window is when and how long.
type Window struct {
	Started string `json:"started"` // RFC 3339, UTC
	// DurationNS is the time from the first sample to the last.
	DurationNS        int64  `json:"duration_ns"`
	PlannedDurationNS int64  `json:"planned_duration_ns"`
	IntervalNS        int64  `json:"interval_ns"`
	SlowTierNS        int64  `json:"slow_tier_ns"`
	RollupTierNS      int64  `json:"rollup_tier_ns"`
	Samples           int    `json:"samples"`
	Ended             string `json:"ended"`
}

// Counts are what the sampler skipped or could not do, always present.
type Counts struct {
	VanishedThreads int `json:"vanished_threads"`
	VanishedProcs   int `json:"vanished_procs"`
	Overruns        int `json:"overruns"`
	ReadErrors      int `json:"read_errors"`
	RollupSkipped   int `json:"rollup_skipped"`
}

// Machine describes the host.
type Machine struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	Arch     string `json:"arch,omitempty"`
	NumCPU   int    `json:"num_cpu"`
}

// Stat is p50/p95/max of a per-interval series; nil fields were not measured.
type Stat struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	Max *float64 `json:"max"`
	N   int      `json:"samples"`
}

// Process is one process of the tree with its threads.
type Process struct {
	PID int `json:"pid"`
	// StartTime is the process's start in clock ticks since boot (stat
	// field 22): with the pid, its identity across pid reuse.
	StartTime uint64 `json:"start_time_ticks"`
	PPID      int    `json:"ppid"`
	Comm      string `json:"comm"`
	Role      string `json:"role,omitempty"`
	Rank      string `json:"rank,omitempty"`
	// Start is how it came from its parent: "fork" (its parent's memory
	// layout: no exec) or "exec"; empty when not known.
	Start   string   `json:"start,omitempty"`
	Cmdline []string `json:"cmdline,omitempty"`
	Exited  bool     `json:"exited,omitempty"`
	// Env holds only allowlisted variables.
	Env         map[string]string `json:"env,omitempty"`
	CPUsAllowed string            `json:"cpus_allowed,omitempty"`
	MemsAllowed string            `json:"mems_allowed,omitempty"`

	ThreadCount int `json:"thread_count"`
	// CPUPercent is the process's CPU in percent of one core per interval.
	CPUPercent Stat `json:"cpu_percent"`

	RSSBytes     *float64 `json:"rss_bytes"`
	PSSBytes     *float64 `json:"pss_bytes"`
	USSBytes     *float64 `json:"uss_bytes"`
	USSGrowthBps *float64 `json:"uss_growth_bytes_per_sec"`
	// COWCopiedBytes is, for a process forked from its parent (no exec
	// since), what it holds as private copies of the anonymous memory it
	// inherited (smaps Private_Dirty at the parent's addresses), at its
	// last reading; absent when not read.
	COWCopiedBytes *float64 `json:"cow_copied_bytes,omitempty"`
	RSSGrowthBps   *float64 `json:"rss_growth_bytes_per_sec"`
	FDs            *float64 `json:"fds"`
	FDLimit        *uint64  `json:"fd_soft_limit"`
	FDLimitHard    *uint64  `json:"fd_hard_limit"`
	FDGrowthPerSec *float64 `json:"fd_growth_per_sec"`

	ReadBytesPerSec     *float64 `json:"read_bytes_per_sec"`      // rchar: read-like calls
	DiskReadBytesPerSec *float64 `json:"disk_read_bytes_per_sec"` // read_bytes: from storage
	ReadCallsPerSec     *float64 `json:"read_calls_per_sec"`
	MeanReadBytes       *float64 `json:"mean_read_bytes"`

	// Threads are sorted busiest first (p95 CPU). Text shows the first
	// ShownThreads; HiddenThreads summarises the rest.
	Threads       []Thread       `json:"threads"`
	ShownThreads  int            `json:"-"`
	HiddenThreads *HiddenThreads `json:"-"`
	// NotVisible maps a field to why it could not be read.
	NotVisible map[string]string `json:"not_visible,omitempty"`
}

// HiddenThreads summarises the threads the text report does not list.
type HiddenThreads struct {
	Count     int     `json:"count"`
	MaxCPUP95 float64 `json:"max_cpu_p95"`
}

// Thread is one thread's line.
type Thread struct {
	TID    int    `json:"tid"`
	Comm   string `json:"comm"`
	Role   string `json:"role,omitempty"`
	Exited bool   `json:"exited,omitempty"`
	// CPUPercent: share of one core per interval (schedstat).
	CPUPercent Stat `json:"cpu_percent"`
	// UserPercent: user share of its CPU time (utime / (utime+stime)).
	UserPercent *float64 `json:"user_percent"`
	// RunQueueWaitPercent: share of wall time runnable but not running, mean and p95.
	RunQueueWaitPercent    *float64 `json:"runqueue_wait_percent"`
	RunQueueWaitPercentP95 *float64 `json:"runqueue_wait_p95_percent"`
	VoluntaryPerSec        *float64 `json:"voluntary_switches_per_sec"`
	InvoluntaryPerSec      *float64 `json:"involuntary_switches_per_sec"`
	// State is the last state read ("R", "S", "D"...).
	State string `json:"state"`
	// Blocked is where it last waited (slow tier), when it was asleep.
	Blocked *timeline.Blocked `json:"blocked,omitempty"`
}

// Host is the machine during the window.
type Host struct {
	NumCPU      int        `json:"num_cpu"`
	BusyPercent Stat       `json:"busy_percent"`
	IOWaitPct   *float64   `json:"iowait_percent"`
	Busiest     []CPUShare `json:"busiest_cpus"`
	// RunQueue is procs_running (host-wide runnable tasks) per tick.
	RunQueue       Stat     `json:"procs_running"`
	RunQueuePerCPU *float64 `json:"procs_running_per_cpu_p95"`
	ProcsBlocked   *float64 `json:"procs_blocked_max"`
	PSI            *PSI     `json:"psi,omitempty"`
	MemAvailable   *float64 `json:"mem_available_bytes"`
	MemTotal       *float64 `json:"mem_total_bytes"`
	Dirty          *float64 `json:"dirty_bytes"`
	Disks          []Disk   `json:"disks"`
}

// CPUShare is one CPU's mean shares over the window, in percent.
type CPUShare struct {
	CPU    int      `json:"cpu"`
	Busy   *float64 `json:"busy_percent"`
	User   *float64 `json:"user_percent"`
	System *float64 `json:"system_percent"`
	IOWait *float64 `json:"iowait_percent"`
	IRQ    *float64 `json:"irq_percent"`
	Steal  *float64 `json:"steal_percent"`
}

// PSI holds mean stall shares in percent over the window.
type PSI struct {
	CPUSome *float64 `json:"cpu_some_percent"`
	MemSome *float64 `json:"memory_some_percent"`
	MemFull *float64 `json:"memory_full_percent"`
	IOSome  *float64 `json:"io_some_percent"`
	IOFull  *float64 `json:"io_full_percent"`
}

// Disk is one block device's rates over the window.
type Disk struct {
	Name             string   `json:"name"`
	ReadsPerSec      *float64 `json:"reads_per_sec"`
	ReadBytesPerSec  *float64 `json:"read_bytes_per_sec"`
	WritesPerSec     *float64 `json:"writes_per_sec"`
	WriteBytesPerSec *float64 `json:"write_bytes_per_sec"`
	AwaitNS          *float64 `json:"await_ns"`
	UtilPercent      *float64 `json:"util_percent"`
}

// GPU is one device over the window.
type GPU struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	UUID  string `json:"uuid,omitempty"`
	// UtilPercent is per-interval utilisation: p10/p50/p90 show burstiness.
	UtilP10    *float64 `json:"util_p10_percent"`
	UtilP50    *float64 `json:"util_p50_percent"`
	UtilP90    *float64 `json:"util_p90_percent"`
	UtilMean   *float64 `json:"util_mean_percent"`
	UtilN      int      `json:"util_samples"`
	MemUtilP50 *float64 `json:"mem_util_p50_percent"`
	SMClockP50 *float64 `json:"sm_clock_p50_mhz"`
	SMClockMin *float64 `json:"sm_clock_min_mhz"`
	MaxSMClock *uint32  `json:"max_sm_clock_mhz"`
	PowerP50   *float64 `json:"power_p50_w"`
	PowerLimit *float64 `json:"power_limit_w"`
	TempMax    *float64 `json:"temp_max_c"`
	PCIeTxP50  *float64 `json:"pcie_tx_p50_bytes_per_sec"`
	PCIeRxP50  *float64 `json:"pcie_rx_p50_bytes_per_sec"`
	// ClockEventReasons is the OR of NVML throttle reasons seen.
	ClockEventReasons uint64   `json:"clock_event_reasons"`
	Lost              string   `json:"lost,omitempty"`
	Unsupported       []string `json:"unsupported,omitempty"`
}

// Observer is gpufeed's own cost while sampling.
type Observer struct {
	CPUPercentOfCore  *float64 `json:"cpu_of_one_core_percent"`
	CPUNS             int64    `json:"cpu_ns"`
	NSPerThreadSample *float64 `json:"per_thread_sample_ns"`
	ThreadSamples     int      `json:"thread_samples"`
	// ThreadSamplesCarried counts the samples of dormant threads (asleep
	// a whole slow period, their process's CPU saying they had not run
	// since) carried from their last reading instead of read.
	ThreadSamplesCarried int   `json:"thread_samples_carried,omitempty"`
	TickP50NS            int64 `json:"tick_p50_ns"`
	TickMaxNS            int64 `json:"tick_max_ns"`
	Overruns             int   `json:"overruns"`
	// Sched is where the threads' run time, run-queue wait and switches
	// came from: "bpf" (the kernel's counters read by a BPF task iterator;
	// the scheduler's events in an older recording) or "proc" (/proc per
	// thread); SchedNotBPF why not the counters, where they were asked for
	// when allowed.
	Sched       string `json:"sched,omitempty"`
	SchedNotBPF string `json:"sched_not_bpf,omitempty"`
	// SchedMissed counts the scheduler events the counting programs did
	// not see (skipped by the kernel, or a switch-in seen missing).
	SchedMissed uint64 `json:"sched_missed,omitempty"`
	// Waits is where the sleeping threads' waits (system call, wait
	// channel) were read: "bpf" (in the kernel, one program run per
	// process) or "proc" (syscall and wchan per thread); WaitsNotBPF why
	// not in the kernel where the counters were.
	Waits       string `json:"waits,omitempty"`
	WaitsNotBPF string `json:"waits_not_bpf,omitempty"`
}

// NotVisible is a fact that could not be read, and the privilege that would show it.
type NotVisible struct {
	Subject string `json:"subject"` // "host", "pid 123 (python3)"
	Field   string `json:"field"`
	Why     string `json:"why"`
}

// Event is something that happened once during the window.
type Event struct {
	AtNS int64  `json:"at_ns"`
	Kind string `json:"kind"`
	PID  int    `json:"pid,omitempty"`
	TID  int    `json:"tid,omitempty"`
	Text string `json:"text,omitempty"`
	// KernelKind is what the judge recognised a kernel log line as
	// (oom-kill, segfault, gpu-xid...); "" for other events and lines of
	// no kind it knows.
	KernelKind string `json:"kernel_kind,omitempty"`
}
