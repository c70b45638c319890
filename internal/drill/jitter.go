package drill

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/drillresult"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sim/cudadrv"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
)

// JitterOptions size the jitter drill.
type JitterOptions struct {
	// Kernels per burst (default 2000) and bursts per row (default 5).
	Kernels, Reps int
	// KernelNS is the simulated duration of each tiny kernel (default
	// 885 ns: the reference's 1.77 ms of GPU time for 2000 kernels); a real
	// GPU runs the empty kernel for as long as it takes.
	KernelNS uint64
	// CPU is the CPU the pinned rows pin the launch thread to (-1: chosen).
	CPU int
}

func (o *JitterOptions) defaults() {
	if o.Kernels <= 0 {
		o.Kernels = 2000
	}
	if o.Reps <= 0 {
		o.Reps = 5
	}
	if o.KernelNS == 0 {
		o.KernelNS = 885
	}
}

// The reference numbers (i9-13900K + RTX 4090, torch 2.8, Python 3.12):
// 2000 tiny kernels whose GPU time is 1.77 ms.
var jitterReference = map[string][2]*drillresult.Value{
	"quiet":          {drillresult.V(4.74e6), drillresult.V(63)},
	"noise_all":      {drillresult.V(21.04e6), drillresult.V(92)},
	"pinned_sibling": {drillresult.V(8.92e6), nil},
	"pinned_quiet":   {drillresult.V(5.35e6), nil},
	"graph":          {drillresult.R(1.72e6, 1.67e6, 1.77e6), nil},
	"graph_noise":    {drillresult.R(1.72e6, 1.67e6, 1.77e6), nil},
}

// jitter holds the drill's driver objects.
type jitter struct {
	b     *Backend
	opt   JitterOptions
	s     cudadrv.Stream
	tiny  cudadrv.Function
	spin  cudadrv.Function
	a, z  cudadrv.Event
	gpuNS float64 // GPU time of one tiny kernel, back to back
	graph cudadrv.GraphExec
}

// Jitter runs the launch-jitter drill: bursts of tiny kernels launched one
// by one from one thread, quiet, against busy processes on every CPU,
// pinned with a busy SMT sibling, pinned on a quiet core, and the same
// kernels captured once into a CUDA graph and replayed with one launch.
func Jitter(ctx context.Context, b *Backend, fs procfs.FS, opt JitterOptions) (*drillresult.Report, error) {
	opt.defaults()
	topo, err := ReadTopology(fs)
	if err != nil {
		return nil, err
	}
	if opt.CPU < 0 {
		opt.CPU = topo.LaunchCPU()
	} else if !topo.Allowed.Contains(opt.CPU) {
		return nil, fmt.Errorf("--cpu %d: this process may run on CPUs %s only", opt.CPU, topo.Allowed)
	}
	rep := &drillresult.Report{
		Drill: "jitter", Backend: b.Desc, Machine: Machine(fs, topo),
		Title:         fmt.Sprintf("%d tiny kernels launched one by one from one thread, then captured once and replayed as one CUDA graph", opt.Kernels),
		ReferenceFrom: ReferenceFrom,
	}
	j := &jitter{b: b, opt: opt}
	if err := j.setup(); err != nil {
		return nil, err
	}
	defer j.close()
	if err := j.measureGPU(); err != nil {
		return nil, err
	}
	gpuTotal := j.gpuNS * float64(opt.Kernels)
	rep.Notes = append(rep.Notes, fmt.Sprintf("GPU time of the %d kernels back to back: %.2f ms (timed with events on the device, queued behind a long kernel that held the stream; the reference's is 1.77 ms)",
		opt.Kernels, gpuTotal/1e6))
	if b.Simulated {
		rep.Notes = append(rep.Notes, fmt.Sprintf("on the simulator each tiny kernel lasts %d ns and each launch costs the launching thread the simulated driver's launch cost in real CPU time, so busy processes delay it as they would a real driver", opt.KernelNS))
	}

	core := topo.Core(opt.CPU)
	others := topo.Allowed.Minus(cpuset.Set{opt.CPU})
	outsideCore := topo.Allowed.Minus(core)
	type rowSpec struct {
		key, label string
		pin        bool
		noise      cpuset.Set
		pinNoise   bool
		graph      bool
		note       string
	}
	sibRow := rowSpec{key: "pinned_sibling", label: fmt.Sprintf("pinned to CPU %d, SMT sibling busy", opt.CPU), pin: true, noise: others, pinNoise: true}
	if len(core) < 2 {
		// No sibling to share the core with: the nearest thing is a busy
		// process on the launch thread's own CPU, as on a node where
		// affinity was set but nothing keeps others off the CPU.
		sibRow.label = fmt.Sprintf("pinned to CPU %d, a busy process on it too", opt.CPU)
		sibRow.noise = topo.Allowed
		sibRow.note = fmt.Sprintf("this machine has no SMT siblings (one thread per core): instead of a busy sibling, a busy process was pinned to CPU %d itself, beside one on every other CPU", opt.CPU)
		rep.Notes = append(rep.Notes, sibRow.note)
	}
	rows := []rowSpec{
		{key: "quiet", label: "quiet"},
		{key: "noise_all", label: fmt.Sprintf("busy processes on all CPUs (%d)", len(topo.Allowed)), noise: topo.Allowed},
		sibRow,
		{key: "pinned_quiet", label: fmt.Sprintf("pinned to CPU %d, its core quiet", opt.CPU), pin: true, noise: outsideCore, pinNoise: true},
		{key: "graph", label: "one CUDA graph replay", graph: true},
		{key: "graph_noise", label: "one CUDA graph replay, all CPUs busy", graph: true, noise: topo.Allowed},
	}
	tab := drillresult.Table{ID: "jitter", Title: fmt.Sprintf("%d tiny kernels: wall time from the first launch to the end of the last kernel", opt.Kernels),
		Columns: []drillresult.Column{
			{Key: "wall_ns", Label: "wall", Unit: drillresult.Nanoseconds},
			{Key: "gpu_idle_percent", Label: "GPU idle", Unit: drillresult.Percent},
			{Key: "preempted_count", Label: "launch thread preempted", Unit: drillresult.Count},
		}}
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		noise, err := StartNoise(r.noise, r.pinNoise)
		if err != nil {
			return nil, err
		}
		walls, preempt, err := j.row(r.pin, r.graph)
		noise.Stop()
		if err != nil {
			return nil, fmt.Errorf("jitter, %s: %w", r.label, err)
		}
		med := median(walls)
		idle := 0.0
		if med > 0 {
			idle = max(0, 100*(1-gpuTotal/med))
		}
		ref := jitterReference[r.key]
		tab.Rows = append(tab.Rows, drillresult.Row{Key: r.key, Label: r.label, Note: r.note,
			Measured:  []*drillresult.Value{drillresult.R(med, slices.Min(walls), slices.Max(walls)), drillresult.V(idle), drillresult.V(float64(preempt))},
			Reference: []*drillresult.Value{ref[0], ref[1], nil}})
	}
	rep.Tables = append(rep.Tables, tab)
	rep.Notes = append(rep.Notes, "wall is the median of the bursts (range in brackets); GPU idle is the share of it the GPU had no kernel to run; preempted counts the launch thread's involuntary context switches over all bursts of the row")
	return rep, nil
}

func (j *jitter) setup() error {
	l, c := j.b.Lib, j.b.Ctx
	var err error
	if j.s, err = l.StreamCreate(c, 1); err != nil { // CU_STREAM_NON_BLOCKING: capturable
		return err
	}
	m, err := l.ModuleLoadData(c, EmptyKernelPTX)
	if err != nil {
		return err
	}
	if j.tiny, err = l.ModuleGetFunction(m, EmptyKernel); err != nil {
		return err
	}
	ms, err := l.ModuleLoadData(c, simcuda.KernelPTX)
	if err != nil {
		return err
	}
	if j.spin, err = l.ModuleGetFunction(ms, simcuda.KernelName); err != nil {
		return err
	}
	if j.a, err = l.EventCreate(c, cudadrv.EventDefault); err != nil {
		return err
	}
	if j.z, err = l.EventCreate(c, cudadrv.EventDefault); err != nil {
		return err
	}
	// Capture the burst once: the graph replays the same kernels.
	if err := l.BeginCapture(c, j.s, cudadrv.CaptureRelaxed); err != nil {
		return err
	}
	for i := 0; i < j.opt.Kernels; i++ {
		if err := l.Launch(c, j.tiny, j.s, j.opt.KernelNS); err != nil {
			l.EndCapture(c, j.s)
			return err
		}
	}
	g, err := l.EndCapture(c, j.s)
	if err != nil {
		return err
	}
	defer l.GraphDestroy(g)
	if j.graph, err = l.GraphInstantiate(c, g); err != nil {
		return err
	}
	// Warm up: the first launches of a module pay for its loading.
	if _, err := j.burst(); err != nil {
		return err
	}
	return nil
}

func (j *jitter) close() {
	l, c := j.b.Lib, j.b.Ctx
	l.StreamSynchronize(c, j.s)
	if j.graph != nil {
		l.GraphExecDestroy(j.graph)
	}
	l.EventDestroy(j.a)
	l.EventDestroy(j.z)
	l.StreamDestroy(c, j.s)
}

// measureGPU measures one tiny kernel's GPU time back to back: a long
// kernel holds the stream while a batch of tiny ones is queued behind it,
// then events before and after the batch time it on the device. The batch
// stays well under any driver's queue depth (about a thousand launches).
func (j *jitter) measureGPU() error {
	l, c := j.b.Lib, j.b.Ctx
	const batch = 256
	hold := uint64(20 * time.Millisecond)
	for try := 0; try < 4; try++ {
		if err := l.Launch(c, j.spin, j.s, hold); err != nil {
			return err
		}
		if err := l.EventRecord(c, j.a, j.s); err != nil {
			return err
		}
		for i := 0; i < batch; i++ {
			if err := l.Launch(c, j.tiny, j.s, j.opt.KernelNS); err != nil {
				return err
			}
		}
		if err := l.EventRecord(c, j.z, j.s); err != nil {
			return err
		}
		held, err := l.EventQuery(c, j.a)
		if err != nil {
			return err
		}
		if err := l.EventSynchronize(c, j.z); err != nil {
			return err
		}
		ms, err := l.EventElapsed(j.a, j.z)
		if err != nil {
			return err
		}
		j.gpuNS = float64(ms) * 1e6 / batch
		if !held { // the long kernel still ran once all were queued
			return nil
		}
		hold *= 4
	}
	return nil
}

// burst launches the kernels one by one and waits for the last: the wall
// time from the first launch to the end.
func (j *jitter) burst() (float64, error) {
	l, c := j.b.Lib, j.b.Ctx
	if err := l.StreamSynchronize(c, j.s); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for i := 0; i < j.opt.Kernels; i++ {
		if err := l.Launch(c, j.tiny, j.s, j.opt.KernelNS); err != nil {
			return 0, err
		}
	}
	if err := l.StreamSynchronize(c, j.s); err != nil {
		return 0, err
	}
	return float64(time.Since(t0)), nil
}

// replay launches the graph once and waits for it.
func (j *jitter) replay() (float64, error) {
	l, c := j.b.Lib, j.b.Ctx
	if err := l.StreamSynchronize(c, j.s); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := l.GraphLaunch(c, j.graph, j.s); err != nil {
		return 0, err
	}
	if err := l.StreamSynchronize(c, j.s); err != nil {
		return 0, err
	}
	return float64(time.Since(t0)), nil
}

// row runs the bursts of one row on one OS thread (pinned when pin), and
// counts that thread's involuntary context switches.
func (j *jitter) row(pin, graph bool) (walls []float64, preempted uint64, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if pin {
			restore, perr := pinThread(j.opt.CPU)
			if perr != nil {
				err = perr
				return
			}
			defer restore()
		}
		tid := unix.Gettid()
		before := nonvoluntary(tid)
		for i := 0; i < j.opt.Reps; i++ {
			var w float64
			if graph {
				w, err = j.replay()
			} else {
				w, err = j.burst()
			}
			if err != nil {
				return
			}
			walls = append(walls, w)
		}
		preempted = nonvoluntary(tid) - before
	}()
	<-done
	return walls, preempted, err
}

func nonvoluntary(tid int) uint64 {
	fs, err := procfs.NewFS("", "")
	if err != nil {
		return 0
	}
	st, err := fs.ThreadStatus(unix.Getpid(), tid)
	if err != nil {
		return 0
	}
	return st.NonvoluntaryCtxt
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
