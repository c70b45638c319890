// Package timeline is the plain data every judgement reads: samples over time
// of a job's threads and processes, the host and the GPUs, keyed by process
// identity (pid + start time). A live run fills one; a recording replays one;
// the rules never know which.
//
// Counters are stored raw (cumulative, as the kernel reports them); analyses
// compute rates from consecutive samples. Optional readings are pointers or
// carry an explicit visibility: a field that could not be read is never zero.
package timeline

import (
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// SchemaVersion is the version of the recorded timeline format. Bump it on any
// incompatible change; readers refuse versions they do not know.
const SchemaVersion = 1

// Timeline is one observation of a job.
type Timeline struct {
	Meta Meta `json:"meta"`
	// Procs holds each process seen, by identity, with its static facts.
	Procs map[ProcKey]*ProcInfo `json:"-"`
	// Threads holds each thread seen, with its static facts.
	Threads map[ThreadKey]*ThreadInfo `json:"-"`
	// Ticks are the samples, oldest first.
	Ticks []Tick `json:"-"`
	// Devices are the GPUs' static facts; GPU samples live in the ticks.
	Devices []gpu.DeviceInfo `json:"devices,omitempty"`
	// Events are things that happened once: a process appeared or exited, a
	// device was lost, a kernel log line matched.
	Events []Event `json:"-"`
	// Counts tallies what the sampler skipped, so nothing is silently lost.
	Counts Counts `json:"counts"`
}

// Meta describes the observation.
type Meta struct {
	SchemaVersion int       `json:"schema_version"`
	Tool          string    `json:"tool"` // "gpufeed v0.1.0"
	Hostname      string    `json:"hostname"`
	Kernel        string    `json:"kernel"`
	NumCPU        int       `json:"num_cpu"`
	ClockTick     int       `json:"clock_tick"` // USER_HZ, for utime/stime
	PageSize      int       `json:"page_size"`
	Started       time.Time `json:"started"` // wall clock at T=0
	Interval      Duration  `json:"interval"`
	Duration      Duration  `json:"duration"` // planned window
	Target        Target    `json:"target"`
	// ProcRoot and SysRoot are where /proc and /sys were read from.
	ProcRoot string `json:"proc_root"`
	SysRoot  string `json:"sys_root"`
	// GPUSource names the device source ("NVML 550.54.15", "simulated device at ...")
	// or says why none was used ("no NVIDIA driver: libnvidia-ml.so.1 not found").
	GPUSource string `json:"gpu_source"`
	// Arch is the host architecture the syscall numbers were named for ("x86_64", "arm64").
	Arch string `json:"arch,omitempty"`
	// Tiers are the sampling periods actually used (fast = Interval).
	Tiers Tiers `json:"tiers"`
	// NotVisible maps a host-wide fact ("psi", "diskstats") to why it was not read.
	NotVisible map[string]string `json:"not_visible,omitempty"`
	// Observer is gpufeed's own cost while sampling: the observer's cost is
	// part of the measurement.
	Observer *Observer `json:"observer,omitempty"`
	// Ended says how the window ended: "duration", "target exited", "interrupted",
	// "stopped by SIGTERM" (a signal reached gpufeed; a note says when),
	// "memory budget reached" (sample.EndedBudget: a note says why).
	Ended string `json:"ended,omitempty"`
	// UptimeNS is the time since boot at T=0 (PROC/uptime), 0 when not
	// read: a process's age at T is UptimeNS + T - start_time/ClockTick.
	UptimeNS int64 `json:"uptime_ns,omitempty"`
	// Notes are what the run learnt about its target that a reader must
	// know to read the report: the target was a zombie, gpufeed's own
	// process was inside the watched tree and left out. The report shows
	// them; a recording keeps them.
	Notes []string `json:"notes,omitempty"`
	// ObserverParent is the job's process that gpufeed itself runs under
	// (a shell that started gpufeed on its own $$): the observer is left
	// out of the job, so that process's wait for its child is a wait for
	// gpufeed. 0 when gpufeed does not run inside the watched tree.
	ObserverParent int `json:"observer_parent,omitempty"`
	// Checks are gpufeed check's results for the target, run once at the end
	// of the window with the same GPU source, so that a recording judged
	// later reproduces them without re-running them. Nil when not run.
	Checks *Checks `json:"checks,omitempty"`
	// CPUProfile is where the job's threads spent their CPU over the
	// window (sampled on every CPU), or why it was not taken. Nil in a
	// recording made before gpufeed profiled.
	CPUProfile *profile.CPUProfile `json:"cpu_profile,omitempty"`
	// Syscalls is the job's syscall summary over the window (per thread,
	// counted in the kernel), and DriverCalls its CUDA driver calls
	// (uprobes on the driver library), or why each was not taken. Nil in a
	// recording made before gpufeed took them.
	Syscalls    *profile.SyscallSummary `json:"syscalls,omitempty"`
	DriverCalls *profile.DriverCalls    `json:"driver_calls,omitempty"`
	// Wakers is who woke the job's threads over the window, from the
	// scheduler's sched_waking events (Observer.Sched "bpf": the whole
	// window in a recording of the events, a sample with the counters,
	// SampledNS); nil when not counted.
	Wakers *Wakers `json:"wakers,omitempty"`
}

// Wakers is the waker graph of the job's threads over the window.
type Wakers struct {
	// Edges are the threads that woke each of the job's threads, most
	// wake-ups first (at most MaxWakersPerThread per woken thread).
	Edges []WakeEdge `json:"edges"`
	// Dropped counts the wake-ups whose edge the kernel's table could not
	// hold.
	Dropped uint64 `json:"dropped,omitempty"`
	// SampledNS is how long the wake-ups were counted, where they were
	// counted for part of the window (the kernel's counters as the
	// source: the wake-up program attached a tenth of the time, in spells
	// of 300 ms every 3 s at the defaults); 0: the whole window.
	SampledNS int64 `json:"sampled_ns,omitempty"`
}

// MaxWakersPerThread bounds the edges kept per woken thread.
const MaxWakersPerThread = 16

// WakeEdge says that thread Waker (of process WakerPID, named WakerComm at
// its first wake-up) woke thread Wakee Count times. For a wake-up from an
// interrupt the waker is the thread the interrupt came in on; 0 is the
// idle task.
type WakeEdge struct {
	Wakee     int    `json:"wakee"`
	Waker     int    `json:"waker"`
	WakerPID  int    `json:"waker_pid"`
	WakerComm string `json:"waker_comm,omitempty"`
	Count     uint64 `json:"count"`
}

// Checks is what the platform checks (internal/check) concluded at the end
// of a window.
type Checks struct {
	// T is when they ran, monotonic nanoseconds since Started.
	T int64 `json:"t"`
	// Statuses counts the results by status ("ok", "warn", "fail", "absent" ...).
	Statuses map[string]int `json:"statuses"`
	// Findings are the warn and fail results (check.Findings).
	Findings []finding.Finding `json:"findings,omitempty"`
}

// Tiers are the periods of the sampler's slower tiers.
type Tiers struct {
	// Slow: per-thread status (context switches), blocked-thread details, per-process
	// status, io and fd count, host PSI, meminfo and diskstats.
	Slow Duration `json:"slow"`
	// Rollup: smaps_rollup (PSS/USS) per process, further limited by a CPU budget.
	Rollup Duration `json:"rollup"`
}

// Observer is what sampling cost gpufeed itself.
type Observer struct {
	// CPUUserNS and CPUSysNS are gpufeed's own CPU time over the window
	// (getrusage RUSAGE_SELF: the sampler, the GPU source, the runtime; in
	// the agent, the sampler's ticks' own, RUSAGE_THREAD).
	CPUUserNS uint64 `json:"cpu_user_ns"`
	CPUSysNS  uint64 `json:"cpu_sys_ns"`
	// WallNS is the sampling window's wall time.
	WallNS int64 `json:"wall_ns"`
	// ThreadSamples is the number of per-thread samples taken.
	ThreadSamples int `json:"thread_samples"`
	// ThreadSamplesCarried counts those carried from a dormant thread's
	// last reading instead of read (its schedstat had not moved for a slow
	// period, and its process's CPU said it had not run since).
	ThreadSamplesCarried int `json:"thread_samples_carried,omitempty"`
	// TickP50NS and TickMaxNS are the wall time one tick took to sample.
	TickP50NS int64 `json:"tick_p50_ns"`
	TickMaxNS int64 `json:"tick_max_ns"`
	// Sched is where the threads' run time, run-queue wait, slices and
	// switches came from: SchedBPF (the kernel's per-thread counters read
	// by a BPF task iterator once per tick; in recordings made before
	// 2026-12-05, the scheduler's events counted by BPF programs) or SchedProc (schedstat and status per
	// thread); empty for a tree that is not the host's (a fixture) and for
	// recordings made before it was kept.
	Sched string `json:"sched,omitempty"`
	// SchedNotBPF says why the events were not used where they were
	// asked for when allowed (--sched auto): the missing capability or
	// kernel feature.
	SchedNotBPF string `json:"sched_not_bpf,omitempty"`
	// SchedMissed counts the scheduler events the counting programs did
	// not see in the window (the kernel skipped them: a program already
	// running on that CPU; or a switch-out came with no switch-in seen
	// before it): each lost at most a slice, a switch and its time.
	SchedMissed uint64 `json:"sched_missed,omitempty"`
	// Waits is where the sleeping threads' waits (the system call and
	// the wait channel) were read: SchedBPF (in the kernel, by a BPF
	// program walking the process's threads) or SchedProc (syscall and
	// wchan per thread); empty where Sched is, and in recordings made
	// before 2026-12-05. WaitsNotBPF says why not in the kernel where the
	// counters were.
	Waits       string `json:"waits,omitempty"`
	WaitsNotBPF string `json:"waits_not_bpf,omitempty"`
}

// Where the threads' scheduling counters came from (Observer.Sched).
const (
	SchedBPF  = "bpf"
	SchedProc = "proc"
)

// Target is what was observed: an attached PID or a launched command.
type Target struct {
	PID       int      `json:"pid"`
	StartTime uint64   `json:"start_time"` // clock ticks since boot (/proc/PID/stat field 22)
	Command   []string `json:"command,omitempty"`
	Launched  bool     `json:"launched"`
	// Held: the launched command was held before its execve until the
	// window's first reading (its start time is its held child's fork,
	// before the window): the command itself started at the window's start.
	Held     bool `json:"held,omitempty"`
	ExitCode *int `json:"exit_code,omitempty"`
}

// Duration is a time.Duration that reads and writes as a string ("100ms").
type Duration time.Duration

// MarshalText writes the duration as Go prints it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration written by MarshalText.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// ProcKey identifies a process across PID reuse.
type ProcKey struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// ThreadKey identifies a thread across TID reuse.
type ThreadKey struct {
	TID       int    `json:"tid"`
	StartTime uint64 `json:"start_time"`
}

// ProcInfo holds what is read once (or rarely) about a process.
type ProcInfo struct {
	Key     ProcKey  `json:"key"`
	PPID    int      `json:"ppid"`
	Comm    string   `json:"comm"`
	Cmdline []string `json:"cmdline,omitempty"`
	// Env holds only allowlisted variables (see internal/probe: EnvAllowlist).
	Env map[string]string `json:"env,omitempty"`
	// DeviceChannels are the descriptors through which the process talks to
	// a GPU, read once at the end of the window (internal/probe/devchan);
	// nil when not read. A thread blocked on one of them waits on the device.
	DeviceChannels *DeviceChannels `json:"device_channels,omitempty"`
	// Role is what gpufeed recognised the process as: "trainer", "dataloader-worker",
	// "torchrun", "rank" ... empty when unknown.
	Role string `json:"role,omitempty"`
	// Layout is where the process's program lies in its address space
	// (/proc/PID/stat), read when it is first seen and on every slow tick
	// after: a fork keeps the parent's layout, an exec lays out a new one.
	// Nil when not visible (another user's process without CAP_SYS_PTRACE).
	Layout *Layout `json:"layout,omitempty"`
	// Start is how the process came from its parent, judged from the two
	// layouts when roles are named: "fork" (it still runs its parent's
	// image: the same layout), "exec" (it runs a program of its own), empty
	// when not known (no parent in the tree, or a layout not visible).
	Start string `json:"start,omitempty"`
	// NoFileSoft/Hard are RLIMIT_NOFILE; nil when not visible.
	NoFileSoft *uint64 `json:"nofile_soft,omitempty"`
	NoFileHard *uint64 `json:"nofile_hard,omitempty"`
	// CPUsAllowed and MemsAllowed are list strings as in /proc/PID/status ("0-15").
	CPUsAllowed string `json:"cpus_allowed,omitempty"`
	MemsAllowed string `json:"mems_allowed,omitempty"`
	FirstSeen   int64  `json:"first_seen_ns"`
	LastSeen    int64  `json:"last_seen_ns"`
	// Exited is set when the process was seen to go away during the window.
	Exited bool `json:"exited,omitempty"`
	// NotVisible maps a field name to why it could not be read and what privilege would show it.
	NotVisible map[string]string `json:"not_visible,omitempty"`

	// Read once, near the end of the window (the end of the window, internal/diagnose); nil
	// when not read.
	// FDKinds is what the open descriptors are.
	FDKinds *FDKinds `json:"fd_kinds,omitempty"`
	// CUDA is what of the CUDA driver the process maps or holds open.
	CUDA *CUDAUse `json:"cuda,omitempty"`
	// MemCgroup is the process's memory cgroup, its limit and usage.
	MemCgroup *MemCgroup `json:"mem_cgroup,omitempty"`
	// Cgroup is what the process's cgroups limit (CPU quota, cpuset,
	// memory, pids), read on its first slow tick and again every few
	// seconds; nil when no cgroup hierarchy is visible.
	Cgroup *Cgroup `json:"cgroup,omitempty"`
	// Listening are the listening sockets the process holds
	// (internal/probe/listen): a process waiting in accept or in an event
	// loop on one waits for requests.
	Listening *Listening `json:"listening,omitempty"`
	// Collectives is what of the collective-communication libraries the
	// process maps (which torch.distributed backend it can be using).
	Collectives *Collectives `json:"collectives,omitempty"`
}

// Collectives are the collective-communication objects a process maps
// (internal/probe/cudamaps): libnccl, librccl, libmpi, libucc, libgloo
// paths, and "/dev/shm/nccl-*" for NCCL's shared-memory segments.
type Collectives struct {
	Mapped []string `json:"mapped"`
}

// Layout is a process's memory layout as /proc/PID/stat gives it: the text
// and data segments, the start of the stack and of the heap, the argument
// and environment strings (addresses).
type Layout struct {
	StartCode  uint64 `json:"start_code"`
	EndCode    uint64 `json:"end_code"`
	StartStack uint64 `json:"start_stack"`
	StartData  uint64 `json:"start_data,omitempty"`
	EndData    uint64 `json:"end_data,omitempty"`
	StartBrk   uint64 `json:"start_brk,omitempty"`
	ArgStart   uint64 `json:"arg_start"`
	ArgEnd     uint64 `json:"arg_end"`
	EnvStart   uint64 `json:"env_start,omitempty"`
	EnvEnd     uint64 `json:"env_end,omitempty"`
}

// Listening is what a process listens on, read once near the end of the window.
type Listening struct {
	// T is when it was read, monotonic nanoseconds since Meta.Started.
	T       int64          `json:"t"`
	Sockets []ListenSocket `json:"sockets"`
}

// ListenSocket is one listening socket.
type ListenSocket struct {
	// Proto is "tcp", "tcp6" or "unix"; Addr "127.0.0.1:8000", "[::]:80", a
	// path, "@name" (abstract) or "" (unnamed).
	Proto string `json:"proto"`
	Addr  string `json:"addr"`
	// Inode matches the "socket:[N]" a thread blocked in accept waits on.
	Inode uint64 `json:"inode"`
}

// Names lists the sockets as "tcp 127.0.0.1:8000".
func (l *Listening) Names() []string {
	if l == nil {
		return nil
	}
	out := make([]string, 0, len(l.Sockets))
	for _, s := range l.Sockets {
		if s.Addr == "" {
			out = append(out, s.Proto+" (unnamed)")
		} else {
			out = append(out, s.Proto+" "+s.Addr)
		}
	}
	return out
}

// FDKinds counts a process's open descriptors by kind (internal/probe/fdkinds:
// "file", "socket", "pipe", "anon_inode", "nvidia", "device", "memfd", "other").
type FDKinds struct {
	// T is when they were read, monotonic nanoseconds since Meta.Started.
	T      int64          `json:"t"`
	ByKind map[string]int `json:"by_kind"`
	// TopDirs are the directories holding the most open regular files.
	TopDirs []DirCount `json:"top_dirs,omitempty"`
}

// DirCount is a directory and how many open files it holds.
type DirCount struct {
	Dir string `json:"dir"`
	N   int    `json:"n"`
}

// CUDAUse is what of the CUDA driver a process maps or holds open.
type CUDAUse struct {
	// Mapped lists libcuda.so* and /dev/nvidia* mappings (/proc/PID/maps).
	Mapped []string `json:"mapped"`
	// DeviceFDs lists the /dev/nvidia* nodes held open (/proc/PID/fd).
	DeviceFDs []string `json:"device_fds"`
	// DriverAPI lists the mapped shared objects that export the CUDA
	// driver's entry point, cuInit (read from their dynamic symbol tables):
	// libcuda.so, or any library implementing the driver API under another
	// name (gpufeed's simulated driver).
	DriverAPI []string `json:"driver_api,omitempty"`
}

// DriverLoaded says the process maps a CUDA driver: a library exporting
// the driver API, or libcuda.so by name where the exports were not read.
// Runtimes load the driver only to initialise it.
func (c *CUDAUse) DriverLoaded() bool {
	if c == nil {
		return false
	}
	if len(c.DriverAPI) > 0 {
		return true
	}
	for _, m := range c.Mapped {
		if len(m) < 11 || m[:11] != "/dev/nvidia" {
			return true // libcuda.so*
		}
	}
	return false
}

// Initialised says the process holds a CUDA context's driver handles:
// /dev/nvidia* mapped or open.
func (c *CUDAUse) Initialised() bool {
	if c == nil {
		return false
	}
	if len(c.DeviceFDs) > 0 {
		return true
	}
	for _, m := range c.Mapped {
		if len(m) > 11 && m[:11] == "/dev/nvidia" {
			return true
		}
	}
	return false
}

// MemCgroup is a process's memory cgroup and the tightest limit on its path.
type MemCgroup struct {
	// T is when it was read, monotonic nanoseconds since Meta.Started.
	T       int64  `json:"t"`
	Version int    `json:"version"`
	Path    string `json:"path"`
	// LimitBytes is nil when no limit is set; LimitAt is the cgroup setting it.
	LimitBytes *uint64 `json:"limit_bytes,omitempty"`
	LimitAt    string  `json:"limit_at,omitempty"`
	// UsageBytes is the usage of the limiting cgroup; nil when not readable.
	UsageBytes *uint64 `json:"usage_bytes,omitempty"`
}

// DeviceChannels are the descriptors a process talks to a GPU through.
type DeviceChannels struct {
	// T is when they were read, monotonic nanoseconds since Meta.Started.
	T int64 `json:"t"`
	// Channels are fd targets as /proc/PID/fd names them: /dev/nvidia*
	// nodes, and Unix sockets connected to a simulated device ("socket:[4242]").
	Channels []string `json:"channels,omitempty"`
	// NotVisible says what could not be told and the privilege that would
	// show it (the fd table, the socket table); empty when all was seen.
	NotVisible string `json:"not_visible,omitempty"`
}

// ThreadInfo holds what is known about a thread beyond its samples.
type ThreadInfo struct {
	Key  ThreadKey `json:"key"`
	PID  int       `json:"pid"`
	Comm string    `json:"comm"`
	// Role: "main", "autograd", "pin-memory", "nccl", "dataloader-worker", "intra-op" ... empty when unknown.
	Role      string `json:"role,omitempty"`
	FirstSeen int64  `json:"first_seen_ns"`
	LastSeen  int64  `json:"last_seen_ns"`
	Exited    bool   `json:"exited,omitempty"`
}

// Tick is one sampling instant.
type Tick struct {
	// T is monotonic nanoseconds since Meta.Started.
	T       int64          `json:"t"`
	Threads []ThreadSample `json:"threads,omitempty"`
	Procs   []ProcSample   `json:"procs,omitempty"`
	Host    *HostSample    `json:"host,omitempty"`
	GPUs    []gpu.Sample   `json:"gpus,omitempty"`
}

// ThreadSample is one thread at one tick. The fast-tier fields are read every
// tick; slow-tier fields are present only on ticks where that tier ran.
type ThreadSample struct {
	TID   int  `json:"tid"`
	PID   int  `json:"pid"`
	State byte `json:"state"` // R, S, D, T, Z ... from stat
	// UTime and STime are clock ticks (stat fields 14 and 15).
	UTime uint64 `json:"utime"`
	STime uint64 `json:"stime"`
	// RunNS, WaitNS, Slices are /proc/PID/task/TID/schedstat: time on CPU,
	// time runnable but waiting on a run queue, and timeslices run.
	RunNS  uint64 `json:"run_ns"`
	WaitNS uint64 `json:"wait_ns"`
	Slices uint64 `json:"slices"`
	CPU    int    `json:"cpu"` // processor last run on (stat field 39)

	// Slow tier (about once a second): /proc/PID/task/TID/status.
	Switches *Switches `json:"switches,omitempty"`
	// Blocked is where a sleeping thread waits, when read.
	Blocked *Blocked `json:"blocked,omitempty"`
}

// Switches are context switch counters.
type Switches struct {
	Voluntary   uint64 `json:"voluntary"`
	Involuntary uint64 `json:"involuntary"`
}

// Blocked says where a sleeping thread waits.
type Blocked struct {
	Wchan string `json:"wchan,omitempty"`
	// Syscall is the name of the system call in progress ("futex", "read"), empty when not visible or not in one.
	Syscall string `json:"syscall,omitempty"`
	// On names what the call waits on, where visible: "pipe:[1234]", "socket:[99]", "/data/x.bin".
	On string `json:"on,omitempty"`
	// Timed is set when the call returns by itself after a time: a sleep,
	// or a wait given a timeout (read from the call's arguments). A thread
	// woken over and over in a timed wait is a timer firing, not work
	// arriving. Recordings made before this field read false.
	Timed bool `json:"timed,omitempty"`
	// NotVisible says why the above could not be read.
	NotVisible string `json:"not_visible,omitempty"`
}

// ProcSample is one process at one tick. Fields read on slower tiers are pointers.
type ProcSample struct {
	PID      int    `json:"pid"`
	Threads  int    `json:"threads"`
	RSSPages uint64 `json:"rss_pages"` // statm resident
	// ChildCPUTicks is the CPU of the children the process has reaped
	// (cutime + cstime, clock ticks), as of its main thread's last stat
	// reading; nil when the main thread was not read (recordings that
	// predate it too). Children too short-lived to be sampled show here.
	ChildCPUTicks *uint64 `json:"child_cpu_ticks,omitempty"`

	// About once a second.
	FDs *int `json:"fds,omitempty"` // entries in /proc/PID/fd
	IO  *IO  `json:"io,omitempty"`
	// Rarely (smaps_rollup): proportional and unique set size.
	PSSBytes *uint64 `json:"pss_bytes,omitempty"`
	USSBytes *uint64 `json:"uss_bytes,omitempty"`
	// With smaps_rollup, for a process forked from its parent that has not
	// exec'd: what it holds of the anonymous mappings it inherited
	// (PROC/PID/smaps of both). Nil when not read.
	Inherited *Inherited `json:"inherited,omitempty"`
	// About once a second: the counters of the process's cgroups (CPU
	// throttling, memory); nil when not read.
	Cgroup *CgroupSample `json:"cgroup,omitempty"`
}

// Inherited is what a forked process holds of the anonymous private
// mappings its parent has too, at the same addresses (fork keeps them):
// the heap, malloc arenas, the interpreter's object arenas. A mapping the
// parent's cover in part counts in proportion (procfs.MatchInherited).
type Inherited struct {
	// Mappings counts its mappings the parent's cover, wholly or in part.
	Mappings int `json:"mappings"`
	// CopiedBytes is its Private_Dirty there: pages it now holds a copy of
	// its own (copy-on-write), its parent's no longer.
	CopiedBytes uint64 `json:"copied_bytes"`
	// SharedBytes is its Shared_Clean + Shared_Dirty there: what it still
	// shares, the most it can still copy.
	SharedBytes uint64 `json:"shared_bytes"`
	// ParentRSSBytes is the parent's resident memory in those mappings.
	ParentRSSBytes uint64 `json:"parent_rss_bytes"`
}

// Cgroup is what limits a process's cgroups: the tightest limit on each
// controller's path and the cgroup setting it (its path as the kernel
// names it, "/kubepods.slice/..."). Absent limits are nil or zero as
// documented; what could not be read is in NotVisible with its reason.
type Cgroup struct {
	// T is when it was read, monotonic nanoseconds since Meta.Started.
	T int64 `json:"t"`
	// Mode is "v1", "v2" or "hybrid".
	Mode string `json:"mode"`
	// CPUVersion and MemVersion say which hierarchy each controller was
	// read from (1 or 2; 0 when not read).
	CPUVersion int `json:"cpu_version,omitempty"`
	MemVersion int `json:"mem_version,omitempty"`
	// CPUPath is the process's cpu cgroup; CPULimitAt the one setting the
	// quota. CPUQuotaUs/CPUPeriodUs are the CFS bandwidth limit (0: none).
	CPUPath     string `json:"cpu_path,omitempty"`
	CPUQuotaUs  int64  `json:"cpu_quota_us,omitempty"`
	CPUPeriodUs int64  `json:"cpu_period_us,omitempty"`
	CPULimitAt  string `json:"cpu_limit_at,omitempty"`
	// CPUWeight (v2 cpu.weight) or CPUShares (v1 cpu.shares).
	CPUWeight *uint64 `json:"cpu_weight,omitempty"`
	CPUShares *uint64 `json:"cpu_shares,omitempty"`
	// CPUSet is the effective cpuset list ("0-3").
	CPUSet string `json:"cpuset,omitempty"`
	// MemPath is the process's memory cgroup; MemMax the tightest limit
	// (nil: none) set at MemLimitAt; MemHigh the tightest v2 memory.high.
	MemPath    string  `json:"mem_path,omitempty"`
	MemMax     *uint64 `json:"mem_max,omitempty"`
	MemLimitAt string  `json:"mem_limit_at,omitempty"`
	MemHigh    *uint64 `json:"mem_high,omitempty"`
	PidsMax    *uint64 `json:"pids_max,omitempty"`
	// NotVisible maps a file or controller to why it was not read.
	NotVisible map[string]string `json:"not_visible,omitempty"`
}

// CPULimit is the quota in CPUs (0.6 for 60000/100000); 0 when none.
func (c *Cgroup) CPULimit() float64 {
	if c == nil || c.CPUQuotaUs <= 0 || c.CPUPeriodUs <= 0 {
		return 0
	}
	return float64(c.CPUQuotaUs) / float64(c.CPUPeriodUs)
}

// CgroupSample are a process's cgroup counters at one slow tick: the CPU
// throttling of the cgroup setting the quota, the memory of the one
// setting the memory limit. A nil part was not read.
type CgroupSample struct {
	CPU         *CgroupCPU `json:"cpu,omitempty"`
	Mem         *CgroupMem `json:"mem,omitempty"`
	PidsCurrent *uint64    `json:"pids_current,omitempty"`
}

// CgroupCPU is cpu.stat's bandwidth counters (cumulative).
type CgroupCPU struct {
	NrPeriods   uint64 `json:"nr_periods"`
	NrThrottled uint64 `json:"nr_throttled"`
	ThrottledNs uint64 `json:"throttled_ns"`
}

// CgroupMem is the memory cgroup's usage, its anonymous and page-cache
// parts (nil when memory.stat was not read) and its cumulative events
// (nil when not read): v2 memory.events; v1 failcnt as Max and
// oom_control's oom_kill and under_oom.
type CgroupMem struct {
	Usage    uint64  `json:"usage"`
	Anon     *uint64 `json:"anon,omitempty"`
	File     *uint64 `json:"file,omitempty"`
	High     uint64  `json:"high,omitempty"`
	Max      uint64  `json:"max,omitempty"`
	OOM      uint64  `json:"oom,omitempty"`
	OOMKill  uint64  `json:"oom_kill,omitempty"`
	UnderOOM bool    `json:"under_oom,omitempty"`
	Events   bool    `json:"events,omitempty"`
}

// IO are /proc/PID/io counters.
type IO struct {
	RChar      uint64 `json:"rchar"`
	WChar      uint64 `json:"wchar"`
	SyscR      uint64 `json:"syscr"`
	SyscW      uint64 `json:"syscw"`
	ReadBytes  uint64 `json:"read_bytes"`
	WriteBytes uint64 `json:"write_bytes"`
}

// HostSample is the host at one tick.
type HostSample struct {
	// CPUs are per-CPU /proc/stat counters in clock ticks, indexed by CPU number.
	CPUs         []CPUTimes `json:"cpus"`
	ProcsRunning int        `json:"procs_running"`
	ProcsBlocked int        `json:"procs_blocked"`
	Ctxt         uint64     `json:"ctxt"`
	// Forks is /proc/stat's "processes": forks since boot, host-wide (0 in
	// recordings that predate it).
	Forks uint64 `json:"forks,omitempty"`
	// PSI is nil where /proc/pressure is absent.
	PSI   *PSI       `json:"psi,omitempty"`
	Mem   *MemInfo   `json:"mem,omitempty"`
	Disks []DiskStat `json:"disks,omitempty"`
}

// CPUTimes is one /proc/stat cpuN line.
type CPUTimes struct {
	CPU     int    `json:"cpu"`
	User    uint64 `json:"user"`
	Nice    uint64 `json:"nice"`
	System  uint64 `json:"system"`
	Idle    uint64 `json:"idle"`
	IOWait  uint64 `json:"iowait"`
	IRQ     uint64 `json:"irq"`
	SoftIRQ uint64 `json:"softirq"`
	Steal   uint64 `json:"steal"`
}

// PSI holds cumulative stall microseconds ("total=") per resource.
type PSI struct {
	CPUSomeUS uint64 `json:"cpu_some_us"`
	MemSomeUS uint64 `json:"mem_some_us"`
	MemFullUS uint64 `json:"mem_full_us"`
	IOSomeUS  uint64 `json:"io_some_us"`
	IOFullUS  uint64 `json:"io_full_us"`
}

// MemInfo holds the /proc/meminfo fields gpufeed uses, in bytes.
type MemInfo struct {
	Total     uint64 `json:"total"`
	Available uint64 `json:"available"`
	Dirty     uint64 `json:"dirty"`
	Writeback uint64 `json:"writeback"`
	SwapTotal uint64 `json:"swap_total"`
	SwapFree  uint64 `json:"swap_free"`
}

// DiskStat is one /proc/diskstats line's counters.
type DiskStat struct {
	Name         string `json:"name"`
	Reads        uint64 `json:"reads"`
	SectorsRead  uint64 `json:"sectors_read"`
	ReadMS       uint64 `json:"read_ms"`
	Writes       uint64 `json:"writes"`
	SectorsWrite uint64 `json:"sectors_written"`
	WriteMS      uint64 `json:"write_ms"`
	InFlight     uint64 `json:"in_flight"`
	IOTicksMS    uint64 `json:"io_ticks_ms"`
	QueueMS      uint64 `json:"queue_ms"`
}

// Event is something that happened once.
type Event struct {
	T    int64  `json:"t"`
	Kind string `json:"kind"` // one of the Event* kinds (vocab.go)
	PID  int    `json:"pid,omitempty"`
	TID  int    `json:"tid,omitempty"`
	Text string `json:"text,omitempty"`
}

// Counts tallies what was skipped and why.
type Counts struct {
	// VanishedThreads and VanishedProcs went away between listing and reading.
	VanishedThreads int `json:"vanished_threads"`
	VanishedProcs   int `json:"vanished_procs"`
	// Overruns counts ticks that started late because the previous one ran long.
	Overruns int `json:"overruns"`
	// ReadErrors counts reads that failed for another reason than a vanished
	// task or a denied file (each also leaves an event of kind "read-error").
	ReadErrors int `json:"read_errors,omitempty"`
	// RollupSkipped counts smaps_rollup reads skipped to stay within the CPU budget.
	RollupSkipped int `json:"rollup_skipped,omitempty"`
}
