package judge

import (
	"fmt"
	"math"

	"github.com/gpufeed/gpufeed/internal/derive"
)

// LaunchThread is the thread that submits the job's work to the GPU.
type LaunchThread struct {
	T    *derive.Thread
	Proc *derive.Proc
	// How says how it was recognised, for the evidence.
	How string
	// Waits is what it did over the window.
	Waits WaitProfile
	// Demand is its mean share of each interval running or runnable
	// (schedstat run time plus run-queue wait), in percent of one core.
	Demand float64
}

// findLaunchThread picks the launch thread among the GPU processes' threads:
//
//  1. helper threads never launch (pin-memory, NCCL, c10d, intra-op and
//     torch pools, CUDA driver threads, DataLoader workers);
//  2. a thread seen blocked on a device channel talks to the device: such
//     threads come first;
//  3. then the process's main thread or an autograd thread (PyTorch
//     launches the forward pass from the main thread, the backward from
//     pt_autograd_N);
//  4. then the busiest: the most time running or runnable.
//
// The main thread of the straggler rank, when one is named, comes before
// all: the job runs at its pace.
//
// On a real host the CUDA default synchronisation spins before it sleeps, so
// step 2 rarely sees the device and step 3-4 decide; docs/RULES.md says so.
func findLaunchThread(j *Job) *LaunchThread {
	type cand struct {
		th                 *derive.Thread
		p                  *derive.Proc
		device, main       bool
		demand             float64
		profile            WaitProfile
		nonHelper, present bool
		straggler          bool
	}
	var cands []cand
	for _, p := range j.GPUProcs {
		for _, th := range p.Threads {
			c := cand{th: th, p: p, nonHelper: !helperRoles[th.Role], main: th.Role == "main" || th.Role == "autograd" || th.Key.TID == th.PID}
			c.profile = profileWaits(th, p, len(th.CPUPct)+1)
			c.device = c.profile.Asleep[WaitDevice]+c.profile.Asleep[WaitSubmit] > 0
			c.demand = nanZero(th.CPU.Mean) + nanZero(th.Wait.Mean)
			c.present = th.CPU.N > 0
			c.straggler = j.Straggler != nil && th == j.Straggler.Thread
			cands = append(cands, c)
		}
	}
	better := func(a, b cand) bool { // a before b
		for _, k := range [][2]bool{{a.present, b.present}, {a.straggler, b.straggler}, {a.nonHelper, b.nonHelper}, {a.device, b.device}, {a.main, b.main}} {
			if k[0] != k[1] {
				return k[0]
			}
		}
		if a.demand != b.demand {
			return a.demand > b.demand
		}
		return a.th.Key.TID < b.th.Key.TID
	}
	best := -1
	for i := range cands {
		if best < 0 || better(cands[i], cands[best]) {
			best = i
		}
	}
	if best < 0 || !cands[best].present {
		return nil
	}
	c := cands[best]
	var how string
	switch {
	case c.straggler:
		how = "the main thread of the straggler, rank " + j.Straggler.Rank + ","
	case c.device:
		how = fmt.Sprintf("seen blocked on the device %d times", c.profile.Asleep[WaitDevice]+c.profile.Asleep[WaitSubmit])
	case c.main && c.th.Role == "autograd":
		how = "the autograd thread"
	case c.main:
		how = "the main thread"
	default:
		how = "the busiest thread"
	}
	how += fmt.Sprintf(" of pid %d, %s", c.p.Key.PID, j.GPUProcsHow)
	demand := c.demand
	if math.IsNaN(demand) {
		demand = 0
	}
	return &LaunchThread{T: c.th, Proc: c.p, How: how, Waits: c.profile, Demand: demand}
}
