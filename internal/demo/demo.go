// Package demo holds gpufeed's built-in scenarios: small workloads that
// really produce each bottleneck class on the machine they run on, driving
// a simulated GPU (internal/sim) run as its own gpufeed simdev process. `gpufeed demo NAME` starts
// one, diagnoses it for the default window and prints the report; the
// scenario tests check that the verdict is the one the scenario was built to
// produce.
//
// Workloads run as real separate processes: Python ones (standard library
// only, embedded here with the simulated device's Python client) with
// python3, Go ones by re-executing the gpufeed binary with a hidden workload
// command (RunWorkload). Everything they need is embedded, so
// `go run ./cmd/gpufeed demo` works on a machine with only Go and python3.
package demo

import (
	"fmt"
	"slices"
	"sort"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// Scenario is one built-in workload and what it must produce.
type Scenario struct {
	Name string
	// Title is one line: what the workload does.
	Title string
	// Expect is the verdict class the workload is built to produce, as an
	// expert reads it with gpufeed's probes (the CPU profile, the driver
	// calls: gpufeed demo takes them where the host allows, as diagnose
	// does).
	Expect finding.Class
	// WithoutProbes, when set, is the verdict expected where the probes
	// cannot run (an unprivileged user, perf events refused): from /proc
	// alone a launch thread on a CPU all the time reads the same whether it
	// launches, decodes its own input or spins in a synchronisation, and
	// the verdict says so.
	WithoutProbes finding.Class
	// MustFind are finding IDs the report must hold besides the verdict's.
	MustFind []string
	// Python is the embedded script (py/NAME) for a Python workload; Go is
	// the name of a Go workload (RunWorkload) otherwise.
	Python string
	Go     string
	// Neighbours is the number of CPU hogs started outside the job, pinned
	// to the CPU the launch thread is pinned to (GPUFEED_DEMO_CPU).
	Neighbours int
	// Storage: the workload reads a data file the runner places on the temp
	// directory's filesystem, in a block-I/O throttled cgroup when possible.
	Storage bool
	// NoGPU: the workload uses no GPU and is diagnosed with none in view
	// (as diagnose --device none); its simulated device is still started.
	NoGPU bool
	// Sync is how the workload's CUDA waits behave when the scenario is
	// about them: "spin", "yield" or "block" (GPUFEED_SIMDEV_SYNC, the
	// simulated driver's CU_CTX_SCHED_* flags). Empty: the environment's
	// GPUFEED_SIMDEV_SYNC, else CUDA's default (auto: spin while the process
	// has fewer active contexts than the host has CPUs).
	Sync string
	// UnderLoad is a verdict also accepted when the host's other load made
	// the launch thread wait for a CPU: with launch-thread-descheduled among
	// the findings, it holds whatever the thread did while it ran. An
	// inconclusive verdict is accepted there too (it names no class: where
	// the probes show the thread spinning whenever it ran, neither its
	// syncs nor its launches left the GPU idle, its waits for a CPU did).
	UnderLoad finding.Class
	// SlowWake is a verdict also accepted for a job that sleeps in each
	// synchronise: on a crowded host the thread woken from it waits for a
	// CPU before it relaunches, and the per-batch synchronise drains the
	// queue, so the GPU idles while it waits. The verdict is GPU-bound
	// only below a tenth of the window idle (Classify): any other verdict
	// means the GPU idled more, and sync-bound (led by
	// launch-thread-waits-on-gpu) then names whose wait it was.
	SlowWake finding.Class
}

// Default is the scenario `gpufeed demo` runs without a name.
const Default = "submission-bound"

// aliases are former names of scenarios, still accepted (scripts may name
// them): each scenario is named after the verdict it produces, and
// "launch-bound" produced submission-bound.
var aliases = map[string]string{"launch-bound": "submission-bound"}

// Aliases lists the former names of a scenario.
func Aliases(name string) []string {
	var out []string
	for old, now := range aliases {
		if now == name {
			out = append(out, old)
		}
	}
	sort.Strings(out)
	return out
}

var scenarios = []Scenario{
	{Name: "submission-bound", Expect: finding.SubmissionBound, Python: "launch_bound.py",
		Title: "one Python thread launching 2 µs kernels: the GPU idles between launches"},
	// On a saturated host (more runnable tasks outside the job than CPUs)
	// the woken thread waits for a CPU most of the time before relaunching:
	// submission-bound with launch-thread-descheduled is then the true
	// verdict, here and for gpu-bound, as for the spinning scenarios.
	{Name: "sync-bound", Expect: finding.SyncBound, UnderLoad: finding.SubmissionBound, Python: "sync_bound.py", Sync: "block",
		Title: "a synchronisation (loss.item()) after every four 1 ms kernels, then 1 ms of CPU, with blocking synchronisation: the CPU never runs ahead"},
	// The same job with CUDA's spinning wait reads as a launch thread always
	// on a CPU, as a launch loop does: the verdict must name neither class
	// and say what would separate them.
	// On a crowded host its waits for a CPU (which hold it from noticing
	// that the GPU finished as much as from launching) can be the larger
	// cause: submission-bound with launch-thread-descheduled, a CPU of its
	// own first.
	// With the probes the thread's CPU profile and driver calls show it
	// inside the driver's synchronisations: sync-bound.
	{Name: "sync-bound-spin", Expect: finding.SyncBound, WithoutProbes: finding.Inconclusive, UnderLoad: finding.SubmissionBound, Python: "sync_bound.py", Sync: "spin", MustFind: []string{"launch-thread-spins-or-submits"},
		Title: "the sync-bound job with spinning synchronisation (CUDA's default): from outside the thread, spinning and launching look the same"},
	// The training thread decoding its own batches: its CPU profile shows
	// decoding, not launch calls (preprocessing-bound); without it /proc
	// sees a thread on a CPU all the time, submission-bound at most a
	// third sure, with what cannot be told apart and how to tell it.
	{Name: "preprocessing-main-thread", Expect: finding.Preprocessing, WithoutProbes: finding.SubmissionBound, Python: "preprocessing_main_thread.py",
		Title: "a DataLoader with num_workers=0: the training thread decompresses each batch itself (20 ms of CPU), then 1 ms of kernels and a loss read"},
	{Name: "preprocessing-bound", Expect: finding.Preprocessing, Python: "preprocessing.py", MustFind: []string{"dataloader-workers-vs-cores"},
		Title: "one worker process per CPU decompressing zlib records for the trainer: the GPU waits for batches"},
	{Name: "storage-bound", Expect: finding.StorageBound, Python: "storage.py", Storage: true,
		Title: "two readers making 4 KiB O_DIRECT reads that miss the page cache on a throttled disk: the GPU waits for data"},
	{Name: "transfer-bound", Expect: finding.TransferBound, Python: "transfer.py",
		Title: "64 MiB copies from pageable memory before each step: the copies block and dominate"},
	{Name: "too-little-work", Expect: finding.TooLittleWork, Python: "too_little_work.py",
		Title: "an inference service at low load: three 40 µs kernels per request every 5 ms"},
	{Name: "gpu-bound", Expect: finding.GPUBound, UnderLoad: finding.SubmissionBound, Python: "gpu_bound.py",
		Title: "a healthy training loop: 1 ms of CPU per 20 ms of queued kernels, the loss read every 25 steps"},
	{Name: "noisy-neighbour", Expect: finding.SubmissionBound, Python: "noisy_neighbour.py", Neighbours: 2, MustFind: []string{"launch-thread-descheduled"},
		Title: "the submission-bound job pinned to one CPU that two CPU hogs outside the job share"},
	{Name: "oversubscribed", Expect: finding.SubmissionBound, Go: "oversubscribed", MustFind: []string{"cpu-oversubscribed", "launch-thread-descheduled"},
		Title: "a launch thread among spinning intra-op pool threads, twice as many as CPUs (OMP_NUM_THREADS unset)"},
	{Name: "stalled", Expect: finding.Stalled, Python: "stalled.py",
		Title: "a job whose threads block on a lock held by a thread reading a pipe nobody writes"},
	{Name: "gpu-bound-sync", Expect: finding.GPUBound, SlowWake: finding.SyncBound, Python: "gpu_bound_sync.py", Sync: "block",
		Title: "fifty 1 ms kernels then a synchronise, repeated, with blocking synchronisation: the GPU busy, the host asleep in the synchronise, woken 20 times a second"},
	// The same loop with CUDA's spinning wait: the thread is on a CPU
	// throughout. On a crowded host a thread that spins through its time
	// slices is preempted more than one woken from a sleep, and each
	// relaunch after a synchronise can wait for a CPU: the GPU then idles
	// more than a tenth of the time because of it (submission-bound with
	// launch-thread-descheduled).
	{Name: "gpu-bound-sync-spin", Expect: finding.GPUBound, UnderLoad: finding.SubmissionBound, Python: "gpu_bound_sync.py", Sync: "spin",
		Title: "the same loop with spinning synchronisation (CUDA's default): the GPU busy, the host thread on a CPU throughout"},
	{Name: "idle-server", Expect: finding.Idle, Python: "idle_server.py", MustFind: []string{"job-idle"},
		Title: "an inference server waiting in accept() on a listening socket that nobody calls: the GPU idle"},
	{Name: "idle-sleep", Expect: finding.Idle, Python: "idle_sleep.py", NoGPU: true, MustFind: []string{"job-idle"},
		Title: "sleep(1) waiting on a timer, with no GPU in view"},
}

// Scenarios lists every scenario, the default first, then by name.
func Scenarios() []Scenario {
	out := append([]Scenario(nil), scenarios...)
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Name == Default) != (out[j].Name == Default) {
			return out[i].Name == Default
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Lookup finds a scenario by name or former name.
func Lookup(name string) (Scenario, error) {
	if now, ok := aliases[name]; ok {
		name = now
	}
	for _, s := range scenarios {
		if s.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range Scenarios() {
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("no scenario %q: want one of %v (gpufeed demo --list)", name, names)
}

// Check compares a verdict and findings with what the scenario must
// produce; it returns what is wrong, or "" when all is as expected. No
// finding of a scenario may be critical unless it is stalled: a false
// "CRITICAL" about a job that runs costs more than a missed finding.
//
// probed says whether the CPU profile or the driver calls were taken: where
// neither was, WithoutProbes is the verdict expected, if the scenario has
// one.
func (s Scenario) Check(v *finding.Verdict, fs []finding.Finding, probed bool) string {
	if v == nil {
		return "no verdict"
	}
	if s.Expect != finding.Stalled {
		for _, f := range fs {
			if f.Severity == finding.Critical {
				return fmt.Sprintf("verdict %s, but a critical %s finding about a job that runs", v.Class, f.ID)
			}
		}
	}
	have := map[string]bool{}
	for _, f := range fs {
		have[f.ID] = true
	}
	expect := s.Expect
	if !probed && s.WithoutProbes != "" {
		expect = s.WithoutProbes
	}
	underLoad := s.UnderLoad != "" && (v.Class == s.UnderLoad || v.Class == finding.Inconclusive) && have["launch-thread-descheduled"] ||
		s.SlowWake != "" && v.Class == s.SlowWake && slices.Contains(v.Because, "launch-thread-waits-on-gpu")
	if v.Class != expect && !underLoad {
		if expect != s.Expect {
			return fmt.Sprintf("verdict %s, expected %s without the CPU profile and driver calls", v.Class, expect)
		}
		return fmt.Sprintf("verdict %s, expected %s", v.Class, expect)
	}
	for _, id := range s.MustFind {
		if !have[id] {
			return fmt.Sprintf("verdict %s as expected, but no %s finding", v.Class, id)
		}
	}
	return ""
}
