package judge

import (
	"math"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// Unexplained is the attribution key of GPU idle time no cause explains
// (the launch thread's waits not read, or no launch thread).
const Unexplained finding.Class = ""

// SpinOrSubmit is the attribution key of GPU idle time that passed while the
// launch thread was on a CPU but that /proc cannot give to one class: it was
// either submitting work (submission-bound) or spinning in a synchronisation
// (sync-bound), which CUDA does by default and which looks the same from
// outside the thread (running, user time, no system call). It is not a
// class: the verdict names neither and says what would separate them.
const SpinOrSubmit finding.Class = "submission-bound or sync-bound (spinning)"

// Attribution is where the GPU's idle time went. Interval by interval, the
// idle share (100 % minus utilisation) is attributed to what the CPU side
// was doing in that interval, following the playbook of seed 002 ("first,
// is the GPU waiting or working; second, separate CPU submission from CPU
// preprocessing; third, the transport and storage path"):
//
//   - copies near the link's ceiling: transfer-bound, whatever the CPU does;
//   - the launch thread running or runnable at least LaunchSaturatedPct of
//     the interval: it had no time to submit more, so submission-bound;
//   - otherwise it had spare time and waited instead; its idle goes to what
//     it waited for (the window's mix of its sleep readings): the device
//     (sync-bound, or transfer-bound when copies kept the engines busier
//     than kernels), storage (D state, file reads), a timer
//     (too-little-work), or input from the job's other threads, whose own
//     state decides: in D (storage-bound), busy (preprocessing-bound), or
//     neither (too-little-work: nothing in the job waits or works).
//
// Shares are in percent of the measured window, so they add up to the
// GPU's idle share and compare directly with thresholds.ModerateSharePct
// and HighSharePct, as trace analysis compares its idle-time causes.
type Attribution struct {
	// Intervals is the number of intervals in the window; Measured those
	// with a GPU utilisation reading.
	Intervals, Measured int
	// IdlePct is the GPU's mean idle share over the measured intervals.
	IdlePct float64
	// Share maps a class (Unexplained for none) to the share of the window
	// its idle time took, in percent.
	Share map[finding.Class]float64
	// Mostly counts, per class, the intervals whose idle went mostly to it.
	Mostly map[finding.Class]int
	// LaunchSaturated counts the measured intervals in which the launch
	// thread was saturated; LaunchMeasured those where it was read.
	LaunchSaturated, LaunchMeasured int
	// Cause is, per interval, the class most of its idle time went to (the
	// interval Mostly counts); Attributed says which intervals have one
	// (measured, with some idle time). The timeline renderers shade them.
	Cause      []finding.Class
	Attributed []bool
	// Descheduled is the part of the submission-bound share (percent of the
	// window) that passed while the launch thread waited for a CPU: a
	// thread waiting to run cannot launch whatever it runs for, so this part
	// is submission under any reading. The rest of that share passed while
	// it ran, and from /proc its running cannot be told from its own input
	// work or a spin (Classify says so where no probe separated them).
	Descheduled float64
	// Carry is, per class, how many intervals carry it, each counted by the
	// share of its explained idle time (the idle time some cause took) that
	// went to the class: an interval split evenly between two causes
	// carries half of each. CarryN counts the intervals with explained idle
	// time. The confidence counts them (judge/confidence.go), rather than
	// whole intervals won by a hair.
	Carry  map[finding.Class]float64
	CarryN int
}

// Top returns the class with the largest share (excluding Unexplained) and
// that share; "" and 0 when nothing was attributed.
func (at Attribution) Top() (finding.Class, float64) {
	var best finding.Class
	bestShare := 0.0
	for _, c := range finding.Classes {
		if s := at.Share[c]; s > bestShare {
			best, bestShare = c, s
		}
	}
	return best, bestShare
}

// Coverage is the share (0..1) of the window's intervals with a GPU reading.
func (at Attribution) Coverage() float64 {
	if at.Intervals == 0 {
		return 0
	}
	return float64(at.Measured) / float64(at.Intervals)
}

func attribute(in *Input) Attribution {
	j := &in.Job
	n := len(in.View.Intervals)
	at := Attribution{Intervals: n, Share: map[finding.Class]float64{}, Mostly: map[finding.Class]int{}, Carry: map[finding.Class]float64{},
		Cause: make([]finding.Class, n), Attributed: make([]bool, n)}
	launchThread := j.Launch
	// The launch thread's sleep mix over the window, from its readings
	// asleep (D-state ticks are counted per interval below).
	var mix [numWaitKinds]float64
	if launchThread != nil {
		known := 0
		for k := WaitKind(0); k < numWaitKinds; k++ {
			if k != WaitDisk {
				known += launchThread.Waits.Asleep[k]
			}
		}
		for k := WaitKind(0); k < numWaitKinds; k++ {
			if k != WaitDisk && known > 0 {
				mix[k] = float64(launchThread.Waits.Asleep[k]) / float64(known)
			}
		}
		if known == 0 {
			mix[WaitUnknown] = 1
		}
	}
	idleSum := 0.0
	for i := 0; i < n; i++ {
		g := j.GPUUtil[i]
		if math.IsNaN(g) {
			continue
		}
		at.Measured++
		idle := math.Max(0, math.Min(100, 100-g))
		idleSum += idle
		w := map[finding.Class]float64{}
		c := nanZero(j.CopyPct[i])
		switch {
		case c >= thresholds.LinkSaturatedPct:
			w[finding.TransferBound] = 1
		case launchThread == nil || math.IsNaN(launchThread.T.CPUPct[i]):
			w[Unexplained] = 1
		default:
			at.LaunchMeasured++
			r, q := launchThread.T.CPUPct[i], nanZero(launchThread.T.WaitPct[i])
			if r+q >= thresholds.LaunchSaturatedPct {
				at.LaunchSaturated++
				at.Descheduled += idle * splitSaturated(w, r, q, g, c, idle)
				break
			}
			at.Descheduled += idle * attributeSpare(w, j, i, mix, r, q, g, c, idle)
		}
		var most finding.Class
		mostW := -1.0
		for cls, f := range w {
			at.Share[cls] += idle * f
			if f > mostW || (f == mostW && cls < most) {
				most, mostW = cls, f
			}
		}
		if idle > 0 {
			at.Mostly[most]++
			at.Cause[i], at.Attributed[i] = most, true
			if e := 1 - w[Unexplained]; e > 1e-9 {
				at.CarryN++
				for cls, f := range w {
					if cls != Unexplained && f > 0 {
						at.Carry[cls] += f / e
					}
				}
			}
		}
	}
	if at.Measured > 0 {
		at.IdlePct = idleSum / float64(at.Measured)
		for cls := range at.Share {
			at.Share[cls] /= float64(at.Measured)
		}
		at.Descheduled /= float64(at.Measured)
	} else {
		at.IdlePct = math.NaN()
	}
	return at
}

// splitSaturated splits the idle time of an interval in which the launch
// thread ran r% of it and waited for a CPU q% (r + q at least
// LaunchSaturatedPct). Its running time is submission work, or a
// synchronisation that spins: CUDA waits by spinning (cudaDeviceScheduleAuto
// spins while a process has fewer active contexts than the host has CPUs;
// CUDA Runtime API, cudaSetDeviceFlags), and a spinning wait is a running
// thread in user mode with no system call, as a launch loop is. A spin lasts
// only while work it waits for is unfinished, so at most while the device
// was busy (kernels or copies, g + c): the thread ran at least
// r - min(r, g + c) of real work. At the same share of a CPU as it got
// (r of r + q), that work needs wall = work * (r + q) / r of the interval;
// if that exceeds the GPU's own time g, the CPU could not keep the GPU fed
// even with no synchronisation at all: the GPU would still idle 1 - g/wall
// of the time, and that much of the idle is submission whatever the thread
// did. Of the rest, the share the thread spent waiting for a CPU (q of
// r + q) is submission too under either reading: a thread waiting to run
// cannot launch, nor notice that the GPU finished and queue the next step
// (the launch thread descheduled). What remains could be either: it goes
// to SpinOrSubmit. It returns the descheduled part's fraction of the idle
// time (Attribution.Descheduled).
//
// When the copy engines were busier than the kernels (at least
// TransferMinCopyPct and at least g), the bound does not hold: a copy from
// pageable memory keeps the thread on the CPU staging it through a bounce
// buffer (CUDA Driver API, "API synchronization behavior"), and runs below
// the link's rate for longer than its throughput says, so a wait on it can
// outlast c. The thread was then moving data or waiting for it, as a
// thread asleep on the device while copies dominate is (attributeSpare):
// transfer-bound.
func splitSaturated(w map[finding.Class]float64, r, q, g, c, idle float64) float64 {
	if idle <= 0 {
		w[finding.SubmissionBound] = 1
		return 0
	}
	if c >= thresholds.TransferMinCopyPct && c >= g {
		w[finding.TransferBound] = 1
		return 0
	}
	sure, alone := 0.0, 0.0
	if work := r - math.Min(r, math.Min(100, g+c)); work > 0 {
		if wall := work * (r + q) / r; wall > g {
			sure = math.Min(idle, 100*(1-g/wall))
		}
		// With a CPU to itself the same work would take work, not wall:
		// the idle beyond what it would leave then is its waits for a CPU.
		if work > g {
			alone = math.Min(sure, 100*(1-g/work))
		}
	}
	rest := idle - sure
	desched := 0.0
	if r+q > 0 {
		desched = rest * q / (r + q)
	}
	w[finding.SubmissionBound] = (sure + desched) / idle
	if spin := rest - desched; spin > 0 {
		w[SpinOrSubmit] = spin / idle
	}
	return (sure - alone + desched) / idle
}

// attributeSpare splits an interval's GPU idle time when the launch thread
// had spare time (it slept some of the interval). Its sleep can cover at
// most its own length of the idle time: that part goes to what it slept
// on, weighted by how long it slept on each kind of wait. The rest of the
// idle time passed while it ran or waited for a CPU: the CPU side could not
// produce work faster, which is submission, or a spin or a copy's staging,
// split as splitSaturated splits a saturated interval. It returns the
// fraction of the idle time the thread spent waiting for a CPU.
//
// Its share in D comes from the two ticks around the interval; the rest of
// its sleep is split by the window's mix of its sleep readings. A wait on
// the device cannot have lasted longer than the device was busy (kernels or
// copies): beyond that the channel was slow to answer, which explains no GPU
// idle time. A blocked write to the device is the submission path itself.
func attributeSpare(w map[finding.Class]float64, j *Job, i int, mix [numWaitKinds]float64, r, q, g, c, idle float64) float64 {
	sleep := math.Max(0, 100-r-q)
	cover := 1.0
	if idle > 0 {
		cover = math.Min(1, sleep/idle)
	}
	d := math.Min(sleep, dShare(j.Launch.T, i)*100)
	rest := sleep - d
	weights := map[finding.Class]float64{finding.StorageBound: d}
	for k := WaitKind(0); k < numWaitKinds; k++ {
		t := mix[k] * rest
		if t == 0 {
			continue
		}
		switch k {
		case WaitDevice:
			t = math.Min(t, g+c)
			if c >= thresholds.TransferMinCopyPct && c >= g {
				weights[finding.TransferBound] += t
			} else {
				weights[finding.SyncBound] += t
			}
		case WaitSubmit:
			weights[finding.SubmissionBound] += t
		case WaitDisk:
			weights[finding.StorageBound] += t
		case WaitTimer:
			weights[finding.TooLittleWork] += t
		case WaitInput:
			weights[producersState(j, i)] += t
		default:
			weights[Unexplained] += t
		}
	}
	total := 0.0
	for _, v := range weights {
		total += v
	}
	if total <= 0 {
		w[Unexplained] += cover
	} else {
		for cls, v := range weights {
			if v > 0 {
				w[cls] += cover * v / total
			}
		}
	}
	if cover < 1 {
		// The rest passed while it ran or waited for a CPU: split as a
		// saturated interval's idle is (a spin, a pageable copy's staging).
		onCPU := map[finding.Class]float64{}
		d := splitSaturated(onCPU, r, q, g, c, idle)
		for cls, v := range onCPU {
			w[cls] += (1 - cover) * v
		}
		return (1 - cover) * d
	}
	return 0
}

// dShareTicks is how many ticks each side of an interval its D share is
// estimated from: a thread's state is a sample, and about a second of them
// (the slow tier's period at the default interval) estimates the share of
// time it spends in D without turning one unlucky sample into half an
// interval.
const dShareTicks = 5

// dShare is the share (0..1) of the time around interval i a thread spent
// in D, estimated from its state at the ticks within dShareTicks of it.
func dShare(th *derive.Thread, i int) float64 {
	d, k := 0, 0
	for t := i + 1 - dShareTicks; t <= i+dShareTicks; t++ {
		if s := th.Sample(t); s != nil {
			k++
			if s.State == 'D' {
				d++
			}
		}
	}
	if k == 0 {
		return 0
	}
	return float64(d) / float64(k)
}

// ProducerLoad is what the job's other threads did in one interval.
type ProducerLoad struct {
	// BusyPct is their summed share running or runnable, in percent of one core.
	BusyPct float64
	// DiskPct is their summed share in D (uninterruptible: storage), in
	// percent of one thread's time.
	DiskPct float64
}

func producerLoad(j *Job, i int) ProducerLoad {
	var l ProducerLoad
	for _, th := range j.Producers {
		if i < len(th.CPUPct) && !math.IsNaN(th.CPUPct[i]) {
			l.BusyPct += th.CPUPct[i] + nanZero(th.WaitPct[i])
		}
		l.DiskPct += dShare(th, i) * 100
	}
	return l
}

// producersState decides the cause of an interval in which the launch
// thread waited for input: storage when the producers wait on disk at
// least as much as they compute, preprocessing when they compute,
// too-little-work when they do neither (nothing in the job works or waits).
func producersState(j *Job, i int) finding.Class {
	l := producerLoad(j, i)
	switch {
	case l.DiskPct >= thresholds.ProducerIOWaitPct && l.DiskPct >= l.BusyPct:
		return finding.StorageBound
	case l.BusyPct >= thresholds.ProducerBusyPct:
		return finding.Preprocessing
	case l.DiskPct >= thresholds.ProducerIOWaitPct:
		return finding.StorageBound
	}
	return finding.TooLittleWork
}
