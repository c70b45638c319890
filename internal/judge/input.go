package judge

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/judge/frozen"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Input is what every rule reads: the timeline, its analysis, and the view
// of the job the rules share (which processes use the GPU, which thread
// launches, what the GPU did per interval, where the idle time went). It is
// computed once per judgement and never modified by rules.
type Input struct {
	Timeline *timeline.Timeline
	// View is what the timeline shows once derived: per-interval series of
	// every thread, process, the host and each GPU.
	View *derive.View
	// Job is the observed job seen from the GPU's side.
	Job Job
	// Attribution is where the GPU's idle time went, interval by interval.
	Attribution Attribution
	// Frozen is frozen-job triage and the memory/limit analyses
	// (internal/judge/frozen): whether the job progresses at all, who died, where
	// every thread waits.
	Frozen frozen.Result

	// kernel are the timeline's kernel log lines that have a kind,
	// recognised once here (every analysis reads these); kernelIndex the
	// index in Timeline.Events of each.
	kernel      []kernlog.Event
	kernelIndex []int
}

// Job is the observed process tree, with the parts that matter for feeding
// a GPU named.
type Job struct {
	// Procs is every process observed (the target and its descendants).
	Procs []*derive.Proc
	// GPUProcs are the job's processes that use a GPU; GPUProcsHow says how
	// they were recognised.
	GPUProcs    []*derive.Proc
	GPUProcsHow string
	// GPUProcsAssumed: no process of the job was seen using a GPU (none on
	// a device's list, none holding one open), so the target stands in and
	// its launch thread is a guess (launchRef says so).
	GPUProcsAssumed bool
	// Devices are the GPUs the job used (all sampled GPUs when no device
	// lists the job's processes).
	Devices []*derive.GPU
	// GPUUtil is the devices' mean utilisation per interval (percent of the
	// interval a kernel ran: NVML's definition); NaN where not read.
	GPUUtil derive.Series
	// CopyPct estimates the copy engines' busy share per interval: the
	// busier PCIe direction over the link's achievable rate, in percent.
	// NaN where PCIe throughput or the link was not read.
	CopyPct derive.Series
	// LinkBytesPerSec is the achievable rate CopyPct is judged against
	// (raw rate of the negotiated link times PCIeAchievableShare); NaN when unknown.
	LinkBytesPerSec float64
	// LinkName says which link that is ("Gen4 x16").
	LinkName string
	// Launch is the thread that submits work to the GPU; nil when none was found.
	Launch *LaunchThread
	// Producers are every other thread of the job: DataLoader workers,
	// readers, helper threads, intra-op pools.
	Producers []*derive.Thread
	// CPUs is how many CPUs the GPU process may run on (its affinity), or
	// the host's count when the affinity was not read.
	CPUs int
	// CPUsFrom says where CPUs comes from.
	CPUsFrom string
	// Ranks are the job's ranks, by rank (rule_ranks.go); Straggler the one
	// the others wait for, nil when none is named.
	Ranks     []RankView
	Straggler *RankView
}

// NewInput builds the shared view of a timeline.
func NewInput(tl *timeline.Timeline, a *derive.View) *Input {
	in := &Input{Timeline: tl, View: a}
	in.Job = buildJob(tl, a)
	in.Attribution = attribute(in)
	in.kernel, in.kernelIndex = recognise(tl)
	in.Frozen = frozen.AnalyzeKernel(tl, a, in.kernel)
	return in
}

// helperRoles are thread roles that never launch the job's kernels.
var helperRoles = map[string]bool{
	"pin-memory": true, "nccl": true, "c10d": true, "torch-pool": true,
	"intra-op": true, "cuda-driver": true, "dataloader-worker": true,
}

func buildJob(tl *timeline.Timeline, a *derive.View) Job {
	j := Job{Procs: a.Procs, LinkBytesPerSec: math.NaN()}
	n := len(a.Intervals)

	// Which processes use a GPU: the device's own process list first (NVML's
	// running compute processes; the simulated device's connected clients),
	// then descriptors held open on a device, then the target itself.
	listed := map[int]map[int]bool{} // pid -> device indexes listing it
	for _, tk := range tl.Ticks {
		for _, s := range tk.GPUs {
			for _, p := range s.Processes {
				if p.NotVisible != "" || p.PID <= 0 {
					continue
				}
				if listed[p.PID] == nil {
					listed[p.PID] = map[int]bool{}
				}
				listed[p.PID][s.Index] = true
			}
		}
	}
	usedDevices := map[int]bool{}
	for _, p := range a.Procs {
		if devs := listed[p.Key.PID]; devs != nil {
			j.GPUProcs = append(j.GPUProcs, p)
			for d := range devs {
				usedDevices[d] = true
			}
		}
	}
	if len(j.GPUProcs) > 0 {
		j.GPUProcsHow = "listed by the device as a compute process"
	} else {
		for _, p := range a.Procs {
			if dc := p.Info.DeviceChannels; dc != nil && len(dc.Channels) > 0 {
				j.GPUProcs = append(j.GPUProcs, p)
			}
		}
		if len(j.GPUProcs) > 0 {
			j.GPUProcsHow = "holds a device open (" + strings.Join(j.GPUProcs[0].Info.DeviceChannels.Channels, ", ") + ")"
		} else if t := a.Target(); t != nil {
			j.GPUProcs = []*derive.Proc{t}
			j.GPUProcsHow = "the target process (no device listed a process of the job)"
			j.GPUProcsAssumed = true
		}
	}

	// The devices the job used, and their utilisation and copies.
	for _, g := range a.GPUs {
		if len(usedDevices) == 0 || usedDevices[g.Index] {
			j.Devices = append(j.Devices, g)
		}
	}
	j.GPUUtil = meanSeries(n, j.Devices, func(g *derive.GPU) derive.Series { return g.UtilPct })
	j.CopyPct = nanSeriesN(n)
	j.LinkBytesPerSec, j.LinkName = linkCeiling(tl, j.Devices)
	if !math.IsNaN(j.LinkBytesPerSec) {
		for i := 0; i < n; i++ {
			for _, g := range j.Devices {
				v := math.Max(nanZero(g.PCIeRxBps[i]), nanZero(g.PCIeTxBps[i]))
				if math.IsNaN(g.PCIeRxBps[i]) && math.IsNaN(g.PCIeTxBps[i]) {
					continue
				}
				pct := v / j.LinkBytesPerSec * 100
				if math.IsNaN(j.CopyPct[i]) || pct > j.CopyPct[i] {
					j.CopyPct[i] = pct
				}
			}
		}
	}

	j.CPUs, j.CPUsFrom = tl.Meta.NumCPU, "host CPU count"
	if len(j.GPUProcs) > 0 {
		if set, err := cpuset.Parse(j.GPUProcs[0].Info.CPUsAllowed); err == nil && j.GPUProcs[0].Info.CPUsAllowed != "" {
			if c := len(set); c > 0 && (j.CPUs == 0 || c < j.CPUs) {
				j.CPUs, j.CPUsFrom = c, fmt.Sprintf("Cpus_allowed_list %s of pid %d", j.GPUProcs[0].Info.CPUsAllowed, j.GPUProcs[0].Key.PID)
			}
		}
	}
	if j.CPUs <= 0 {
		j.CPUs = 1
	}

	j.Ranks = rankViews(tl, a)
	j.Straggler = Straggler(j.Ranks)
	j.Launch = findLaunchThread(&j)
	for _, p := range a.Procs {
		for _, th := range p.Threads {
			if j.Launch == nil || th != j.Launch.T {
				j.Producers = append(j.Producers, th)
			}
		}
	}
	return j
}

// linkCeiling is the achievable rate of the devices' negotiated PCIe link
// (the latest reading of the current generation and width, else the
// maximum), NaN when unknown.
func linkCeiling(tl *timeline.Timeline, devs []*derive.GPU) (float64, string) {
	best, name := math.NaN(), ""
	for _, g := range devs {
		gen, width := 0, 0
		for i := len(tl.Ticks) - 1; i >= 0 && gen == 0; i-- {
			for _, s := range tl.Ticks[i].GPUs {
				if s.Index == g.Index && s.LinkGen != nil && s.LinkWidth != nil {
					gen, width = *s.LinkGen, *s.LinkWidth
				}
			}
		}
		if gen == 0 && g.Info != nil && g.Info.LinkGenMax != nil && g.Info.LinkWidthMax != nil {
			gen, width = *g.Info.LinkGenMax, *g.Info.LinkWidthMax
		}
		raw, ok := gpu.PCIeLinkBytesPerSec(gen, width)
		if !ok {
			continue
		}
		v := raw * thresholds.PCIeAchievableShare
		if math.IsNaN(best) || v < best {
			best, name = v, fmt.Sprintf("Gen%d x%d", gen, width)
		}
	}
	return best, name
}

func meanSeries(n int, devs []*derive.GPU, pick func(*derive.GPU) derive.Series) derive.Series {
	out := nanSeriesN(n)
	for i := 0; i < n; i++ {
		sum, k := 0.0, 0
		for _, g := range devs {
			if s := pick(g); i < len(s) && !math.IsNaN(s[i]) {
				sum += s[i]
				k++
			}
		}
		if k > 0 {
			out[i] = sum / float64(k)
		}
	}
	return out
}

func nanSeriesN(n int) derive.Series {
	s := make(derive.Series, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

func nanZero(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

// gpuSource names where GPU readings came from, for evidence.
func (in *Input) gpuSource() string {
	if s := in.Timeline.Meta.GPUSource; s != "" {
		return s
	}
	return "GPU source"
}

// utilSource is the Source of a utilisation evidence line.
func (in *Input) utilSource() string {
	return "per-interval utilisation, " + in.gpuSource()
}

// window describes the measured intervals for evidence.
func (in *Input) window(n int) string { return in.View.Window(n) }

// threadName names a thread for claims: "python3 (pid 42, tid 43)".
func threadName(th *derive.Thread) string {
	comm := th.Comm
	if comm == "" && th.Info != nil {
		comm = th.Info.Comm
	}
	if th.Key.TID == th.PID {
		return fmt.Sprintf("%s (pid %d, main thread)", comm, th.PID)
	}
	return fmt.Sprintf("%s (pid %d, tid %d)", comm, th.PID, th.Key.TID)
}

// launchRef names the launch thread at the head of a claim: "the launch
// thread python3 (pid 100, main thread)"; where no process of the job was
// seen using a GPU, which thread launches work is a guess (the main thread,
// else the busiest), and the claim says so rather than calling a thread
// that may never touch a GPU its launch thread.
func (in *Input) launchRef() string {
	th := in.Job.Launch.T
	if in.Job.GPUProcsAssumed {
		return threadName(th) + ", taken as the launch thread (no process of the job was seen using a GPU),"
	}
	return "the launch thread " + threadName(th)
}

// threadSubject is the Subject of a finding about a thread.
func threadSubject(th *derive.Thread) string {
	return fmt.Sprintf("pid %d tid %d (%s)", th.PID, th.Key.TID, th.Comm)
}

// schedSource names where a thread's run time and run-queue wait were read:
// its schedstat, or the same counters read by the task iterator (--sched
// bpf; the scheduler's events counted in the kernel in a recording that
// says it missed some, made before the counters replaced them).
func (in *Input) schedSource(th *derive.Thread) string {
	if o := in.Timeline.Meta.Observer; o != nil && o.Sched == timeline.SchedBPF {
		if o.SchedMissed > 0 {
			return fmt.Sprintf("thread %d's scheduler events (sched_switch, sched_waking), counted in the kernel", th.Key.TID)
		}
		return fmt.Sprintf("thread %d's scheduler counters (sum_exec_runtime, run_delay: what its schedstat shows), read by a BPF task iterator", th.Key.TID)
	}
	return fmt.Sprintf("/proc/%d/task/%d/schedstat", th.PID, th.Key.TID)
}

func durationOf(d timeline.Duration) time.Duration { return time.Duration(d) }
