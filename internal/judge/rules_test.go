package judge

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Each test builds a small synthetic timeline (synth_test.go) on both sides
// of a rule's thresholds and checks the verdict, the findings and their
// numbers.

func TestSubmissionBoundBothSidesOfSaturation(t *testing.T) {
	for _, tc := range []struct {
		cpu, wait float64
		want      finding.Class
	}{
		{95, 0, finding.SubmissionBound},
		{60, 31, finding.SubmissionBound}, // 91 %: saturated, mostly waiting
		// 85 % busy, asleep 15 % on a timer: the sleep covers 15 of the 70
		// idle points, the rest passed while it ran: still submission.
		{85, 0, finding.SubmissionBound},
	} {
		s := &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(tc.cpu), wait: constF(tc.wait),
			blocked: blockedOn("clock_nanosleep", "")})}}
		v, fs, in := s.judge()
		if v.Class != tc.want {
			t.Errorf("cpu %v wait %v: verdict %s, want %s (%v)", tc.cpu, tc.wait, v.Class, tc.want, in.Attribution.Share)
			continue
		}
		f := findingByID(fs, "launch-thread-saturated")
		if f == nil || f.Severity != finding.Warning || f.Evidence[0].Value != 30 {
			t.Errorf("cpu %v: launch-thread-saturated %+v", tc.cpu, f)
		}
	}
	// Saturated with the GPU busy 30 %: a spinning synchronisation could
	// have taken at most those 30 points of its 90, so its work was at least
	// 60, twice the GPU's: even with no synchronisation the GPU would idle
	// half the time. 50 of the 70 idle points are surely submission, 20 may
	// be a spin. With no probe that saw what the thread ran, launching,
	// its own input work and a spin read the same: the confidence is at
	// most a third.
	s := &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(thresholds.LaunchSaturatedPct), wait: constF(0)})}}
	v, _, in := s.judge()
	if math.Abs(in.Attribution.Share[finding.SubmissionBound]-50) > 0.01 || math.Abs(in.Attribution.Share[SpinOrSubmit]-20) > 0.01 || v.Class != finding.SubmissionBound || v.Confidence != thresholds.IndistinctMaxConfidence {
		t.Errorf("saturated: %s, share %v confidence %v, want submission-bound, 50 and 20 spin-or-submit, %v", v.Class, in.Attribution.Share, v.Confidence, thresholds.IndistinctMaxConfidence)
	}
	if !strings.Contains(v.Summary, "another 20% of the window's idle time is "+string(SpinOrSubmit)) {
		t.Errorf("saturated: the summary does not name the share that may be a spin: %q", v.Summary)
	}
	// With the GPU nearly idle a spin explains next to nothing: every idle
	// point but a fraction is the thread's own work; still launching or
	// its own input work, which /proc cannot tell apart.
	s = &synth{n: 50, util: constF(2), procs: []*sProc{trainer(&sThread{cpu: constF(95), wait: constF(0)})}}
	if v, _, in = s.judge(); v.Class != finding.SubmissionBound || v.Confidence != thresholds.IndistinctMaxConfidence || in.Attribution.Share[SpinOrSubmit] > 0.5 {
		t.Errorf("GPU busy 2 %%: %s confidence %v shares %v, want submission-bound with confidence %v", v.Class, v.Confidence, in.Attribution.Share, thresholds.IndistinctMaxConfidence)
	}
	// Just below saturation, asleep on a timer the rest: the 11 % of sleep
	// covers 11 of the 70 idle points.
	s = &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(89), wait: constF(0), state: func(int) byte { return 'S' },
		blocked: blockedOn("clock_nanosleep", "")})}}
	_, _, in = s.judge()
	if got := in.Attribution.Share[finding.TooLittleWork]; math.Abs(got-11) > 0.01 {
		t.Errorf("89 %% busy: too-little-work share %v, want 11 (the sleep covers its own length)", got)
	}
}

func TestDecisionFollowsWhyTheLaunchThreadIsBusy(t *testing.T) {
	s := &synth{n: 50, util: constF(20), procs: []*sProc{trainer(&sThread{cpu: constF(30), wait: constF(68)})}}
	_, fs, _ := s.judge()
	f := findingByID(fs, "launch-thread-saturated")
	if f == nil || !strings.Contains(f.Decision, "CPU of its own") {
		t.Fatalf("mostly waiting for a CPU: decision %q", f.Decision)
	}
	s = &synth{n: 50, util: constF(20), procs: []*sProc{trainer(&sThread{cpu: constF(98), wait: constF(1)})}}
	_, fs, _ = s.judge()
	if f := findingByID(fs, "launch-thread-saturated"); f == nil || !strings.Contains(f.Decision, "CUDA graph") {
		t.Fatalf("running flat out: decision %v", f)
	}
}

func TestSyncBound(t *testing.T) {
	s := &synth{n: 50, util: constF(60), procs: []*sProc{trainer(&sThread{cpu: constF(40), wait: constF(0),
		blocked: blockedOn("recvfrom", "socket:[7]")})}}
	v, fs, in := s.judge()
	if v.Class != finding.SyncBound || math.Abs(in.Attribution.Share[finding.SyncBound]-40) > 0.01 {
		t.Fatalf("verdict %s, shares %v: want sync-bound with 40", v.Class, in.Attribution.Share)
	}
	f := findingByID(fs, "launch-thread-waits-on-gpu")
	if f == nil || !strings.Contains(f.Claim, "6 of 6 readings") || v.Because[0] != f.ID {
		t.Errorf("finding %+v, because %v", f, v.Because)
	}
	// The same socket, when the process's device channels were not read:
	// a socket cannot be told from the device, the idle is unexplained.
	s.procs[0].noChan = true
	v, _, _ = s.judge()
	if v.Class != finding.Inconclusive || !strings.Contains(v.Missing, "device channels were not read") {
		t.Errorf("channels unknown: verdict %s (%s)", v.Class, v.Missing)
	}
	// Waiting on another socket is waiting for input, not on the device.
	s.procs[0].noChan = false
	s.procs[0].threads[0].blocked = blockedOn("recvfrom", "socket:[8]")
	if v, _, _ = s.judge(); v.Class != finding.TooLittleWork {
		t.Errorf("another socket, nobody producing: verdict %s, want too-little-work", v.Class)
	}
}

func TestSyncCappedByDeviceBusy(t *testing.T) {
	// Asleep 95 % on the device while the GPU ran 2 %: the device cannot
	// have held it longer than it worked; a timer reading explains the rest.
	n := 0
	s := &synth{n: 50, util: constF(2), procs: []*sProc{trainer(&sThread{cpu: constF(5), wait: constF(0),
		blocked: func(int) *timeline.Blocked {
			n++
			if n%2 == 0 {
				return &timeline.Blocked{Syscall: "recvfrom", On: "socket:[7]"}
			}
			return &timeline.Blocked{Syscall: "clock_nanosleep"}
		}})}}
	v, _, in := s.judge()
	// Uncapped, half the readings on the device would give sync about 45.
	if v.Class != finding.TooLittleWork || in.Attribution.Share[finding.SyncBound] > 5 {
		t.Errorf("verdict %s shares %v: want too-little-work, sync capped near the GPU's 2 %%", v.Class, in.Attribution.Share)
	}
}

func TestCUDALaunchBlocking(t *testing.T) {
	p := trainer(&sThread{cpu: constF(40), wait: constF(0), blocked: blockedOn("recvfrom", "socket:[7]")})
	p.env = map[string]string{"CUDA_LAUNCH_BLOCKING": "1"}
	s := &synth{n: 50, util: constF(60), procs: []*sProc{p}}
	v, fs, _ := s.judge()
	if f := findingByID(fs, "cuda-launch-blocking"); f == nil || f.Severity != finding.Warning || v.Class != finding.SyncBound ||
		!containsID(v.Because, "cuda-launch-blocking") {
		t.Errorf("CUDA_LAUNCH_BLOCKING=1: %+v, because %v", f, v.Because)
	}
	if f := findingByID(fs, "launch-thread-waits-on-gpu"); f == nil || !strings.HasPrefix(f.Decision, "Unset CUDA_LAUNCH_BLOCKING") {
		t.Errorf("sync decision: %v", f)
	}
	p.env["CUDA_LAUNCH_BLOCKING"] = "0"
	if _, fs, _ = s.judge(); findingByID(fs, "cuda-launch-blocking") != nil {
		t.Error("CUDA_LAUNCH_BLOCKING=0 reported")
	}
}

// pipeline is a trainer waiting on a pipe plus worker processes whose
// threads have the given CPU and state.
func pipeline(workerCPU float64, workerState byte, workers int) *synth {
	s := &synth{n: 50, util: constF(20), procs: []*sProc{trainer(&sThread{cpu: constF(3), wait: constF(0),
		blocked: blockedOn("read", "pipe:[9]")})}}
	for k := 0; k < workers; k++ {
		st := workerState
		s.procs = append(s.procs, &sProc{pid: 200 + k, ppid: 100, role: "worker", cpus: "0-1", threads: []*sThread{{
			tid: 200 + k, comm: "python3", role: "main", cpu: constF(workerCPU), wait: constF(0),
			state: func(int) byte { return st }}}})
	}
	return s
}

func TestPreprocessingBoundBothSidesOfProducerBusy(t *testing.T) {
	// Two workers at 26 % each: 52 % of a core, above ProducerBusyPct.
	v, fs, in := pipeline(26, 'R', 2).judge()
	if v.Class != finding.Preprocessing {
		t.Fatalf("workers at 52 %%: verdict %s (%v)", v.Class, in.Attribution.Share)
	}
	f := findingByID(fs, "input-pipeline-busy")
	if f == nil || f.Evidence[1].Value != 52 || !strings.Contains(f.Evidence[2].Text, "2 workers, 2 CPUs") {
		t.Errorf("finding %+v", f)
	}
	if w := findingByID(fs, "dataloader-workers-vs-cores"); w == nil || w.Severity != finding.Info || !containsID(v.Because, w.ID) {
		t.Errorf("workers finding %+v", w)
	}
	// At 24 % each (48 %), nothing in the job is busy enough: too little work.
	if v, _, _ := pipeline(24, 'R', 2).judge(); v.Class != finding.TooLittleWork {
		t.Errorf("workers at 48 %%: verdict %s, want too-little-work", v.Class)
	}
}

func TestStorageBoundBothSidesOfDiskWait(t *testing.T) {
	// Two readers in D: 200 % of a thread's time waiting on the disk.
	s := pipeline(5, 'D', 2)
	s.procs[1].readBps, s.procs[1].readCall = 1<<20, 4096
	s.iowait = constF(30)
	v, fs, in := s.judge()
	if v.Class != finding.StorageBound {
		t.Fatalf("readers in D: verdict %s (%v)", v.Class, in.Attribution.Share)
	}
	f := findingByID(fs, "input-waits-on-storage")
	if f == nil || f.Evidence[1].Value != 200 || !strings.HasPrefix(f.Decision, "Reads average 4.0 KiB per call, so read less often") {
		t.Errorf("finding %+v", f)
	}
	// One reader in D a tenth of the time: under ProducerIOWaitPct, and
	// idle otherwise: too little work.
	s = pipeline(5, 'S', 2)
	s.procs[1].threads[0].state = func(tick int) byte {
		if tick%10 == 0 {
			return 'D'
		}
		return 'S'
	}
	if v, _, in := s.judge(); v.Class != finding.TooLittleWork || in.Attribution.Share[finding.StorageBound] > 0 {
		t.Errorf("one reader in D 10 %% of ticks: verdict %s shares %v", v.Class, in.Attribution.Share)
	}
}

func TestTransferBound(t *testing.T) {
	link := 31.5e9 * thresholds.PCIeAchievableShare
	// Pageable copies: the launch thread waits on the device while the copy
	// engines are busier than the kernels.
	s := &synth{n: 50, util: constF(10), rxBps: constF(0.45 * link), procs: []*sProc{trainer(&sThread{cpu: constF(10), wait: constF(0),
		blocked: blockedOn("recvfrom", "socket:[7]")})}}
	v, fs, in := s.judge()
	if v.Class != finding.TransferBound {
		t.Fatalf("pageable copies: verdict %s (%v)", v.Class, in.Attribution.Share)
	}
	f := findingByID(fs, "copies-dominate")
	if f == nil || !strings.Contains(f.Claim, "block the launch thread") || math.Abs(f.Evidence[1].Value-45) > 0.5 || !strings.Contains(f.Decision, "pinned memory") {
		t.Errorf("finding %+v", f)
	}
	// The same copies with the thread on a CPU throughout: a pageable copy
	// stages through a bounce buffer and a spinning wait on it is user time,
	// and a copy below the link's rate outlasts its throughput, so the
	// spin bound does not apply: transfer-bound, not submission-bound.
	spin := &synth{n: 50, util: constF(10), rxBps: constF(0.45 * link), procs: []*sProc{trainer(&sThread{cpu: constF(99), wait: constF(1), user: 99})}}
	if v, _, in := spin.judge(); v.Class != finding.TransferBound || in.Attribution.Share[finding.SubmissionBound] > 0 {
		t.Errorf("pageable copies, thread on a CPU: verdict %s (%v), want transfer-bound", v.Class, in.Attribution.Share)
	}
	// Staging on a crowded CPU: it runs 48 %, waits for a CPU 34 % and
	// sleeps on the device the rest. The idle its sleep does not cover
	// passed while it staged copies or waited to: transfer-bound too (it
	// was called submission-bound, 49 of 93 idle points, in a scenario run).
	crowded := &synth{n: 50, util: constF(7), rxBps: constF(0.3 * link), procs: []*sProc{trainer(&sThread{cpu: constF(48), wait: constF(34),
		blocked: blockedOn("recvmsg", "socket:[7]")})}}
	if v, _, in := crowded.judge(); v.Class != finding.TransferBound || in.Attribution.Share[finding.SubmissionBound] > 0 {
		t.Errorf("pageable copies on a crowded CPU: verdict %s (%v), want transfer-bound", v.Class, in.Attribution.Share)
	}
	// Copies under the kernels' time: the waits are synchronisations.
	s.rxBps, s.util = constF(0.04*link), constF(50)
	if v, _, _ := s.judge(); v.Class != finding.SyncBound {
		t.Errorf("copies 4 %%: verdict %s, want sync-bound", v.Class)
	}
	// A saturated link: transfer-bound whatever the launch thread does.
	s = &synth{n: 50, util: constF(30), rxBps: constF(0.85 * link), procs: []*sProc{trainer(&sThread{cpu: constF(99), wait: constF(0)})}}
	v, fs, _ = s.judge()
	if f := findingByID(fs, "copies-dominate"); v.Class != finding.TransferBound || f == nil || !strings.Contains(f.Claim, "the link is the ceiling") {
		t.Errorf("saturated link: verdict %s, finding %v", v.Class, f)
	}
}

func TestTooLittleWork(t *testing.T) {
	s := &synth{n: 50, util: constF(3), procs: []*sProc{trainer(&sThread{cpu: constF(4), wait: constF(0),
		blocked: blockedOn("clock_nanosleep", "")})}}
	v, fs, _ := s.judge()
	f := findingByID(fs, "gpu-underfed")
	// Every interval carries it: 92 % at most for the intervals (the bound
	// weighs at most 30 of them), times its lead.
	if v.Class != finding.TooLittleWork || f == nil || v.Confidence < 0.85 {
		t.Errorf("verdict %+v finding %v", v, f)
	}
}

func TestGPUBoundBothSidesOfIdle(t *testing.T) {
	launcher := func() *sProc {
		return trainer(&sThread{cpu: constF(30), wait: constF(0), blocked: blockedOn("recvfrom", "socket:[7]")})
	}
	s := &synth{n: 50, util: constF(91), clock: constF(1980), procs: []*sProc{launcher()}}
	v, fs, _ := s.judge()
	if v.Class != finding.GPUBound || v.Confidence < 0.9 {
		t.Fatalf("91 %% busy: verdict %+v", v)
	}
	for _, f := range fs {
		if f.Severity >= finding.Warning {
			t.Errorf("healthy job: warning %s: %s", f.ID, f.Claim)
		}
	}
	s = &synth{n: 50, util: constF(89), procs: []*sProc{launcher()}}
	if v, _, _ := s.judge(); v.Class != finding.SyncBound {
		t.Errorf("89 %% busy: verdict %s, want sync-bound (11 %% idle is not GPU-bound)", v.Class)
	}
}

func TestInconclusive(t *testing.T) {
	busy := func() *sProc { return trainer(&sThread{cpu: constF(99), wait: constF(0)}) }
	for _, tc := range []struct {
		name string
		s    *synth
		want string
	}{
		{"short window", &synth{n: thresholds.MinIntervals - 1, util: constF(20), procs: []*sProc{busy()}}, "observe at least"},
		{"target exited", &synth{n: 5, ended: "target exited", util: constF(20), procs: []*sProc{busy()}}, "the target exited after 0.5 s"},
		{"no GPU", &synth{n: 50, noGPU: true, procs: []*sProc{busy()}}, "no GPU was visible"},
		// what moved is said, so that a job expected to be stuck
		// shows where to look
		{"no GPU, moving", &synth{n: 50, noGPU: true, procs: []*sProc{busy()}}, "the job moved over the window (its threads gained 99.00 % of one core), so it is neither stalled nor idle"},
		{"unexplained", &synth{n: 50, util: constF(40), procs: []*sProc{trainer(&sThread{cpu: constF(10), wait: constF(0)})}}, "could not be tied"},
	} {
		v, _, _ := tc.s.judge()
		if v.Class != finding.Inconclusive || !strings.Contains(v.Missing, tc.want) {
			t.Errorf("%s: verdict %s, missing %q; want inconclusive saying %q", tc.name, v.Class, v.Missing, tc.want)
		}
	}
}

// TestNoGPUStillJobSaysNothingMoved: with no GPU reading, a job that did
// not move is judged by frozen-job triage, and the missing device is all
// the report asks for; no "moved" clause.
func TestNoGPUStillJobSaysNothingMoved(t *testing.T) {
	s := &synth{n: 50, noGPU: true, procs: []*sProc{trainer(&sThread{cpu: constF(0), wait: constF(0), blocked: blockedOn("futex", "futex 0x1")})}}
	v, _, _ := s.judge()
	if v.Class != finding.Stalled || strings.Contains(v.Missing, "moved") {
		t.Errorf("a still job: want stalled, nothing said to have moved; %+v", v)
	}
}

func TestStalledComesFromFrozenTriage(t *testing.T) {
	s := &synth{n: 50, util: constF(0), procs: []*sProc{trainer(&sThread{cpu: constF(0), wait: constF(0),
		blocked: blockedOn("futex", "futex 0x1")})}}
	v, fs, _ := s.judge()
	if v.Class != finding.Stalled || v.Because[0] != "job-stalled" {
		t.Fatalf("verdict %+v", v)
	}
	if findingByID(fs, "gpu-underfed") != nil {
		t.Error("a stalled job's idle GPU reported as too little work")
	}
}

func TestDescheduledSeverity(t *testing.T) {
	for _, tc := range []struct {
		wait, util float64
		want       finding.Severity
		present    bool
	}{
		{4, 30, 0, false},
		{6, 30, finding.Info, true},
		{25, 30, finding.Warning, true},
		{25, 95, finding.Info, true}, // the GPU stays busy: the queue absorbs it
	} {
		s := &synth{n: 50, util: constF(tc.util), procs: []*sProc{trainer(&sThread{cpu: constF(100 - tc.wait), wait: constF(tc.wait)})}}
		_, fs, _ := s.judge()
		f := findingByID(fs, "launch-thread-descheduled")
		if (f != nil) != tc.present || (f != nil && f.Severity != tc.want) {
			t.Errorf("wait %v util %v: %+v", tc.wait, tc.util, f)
		}
		if f != nil && tc.util >= 90 && !strings.Contains(f.Claim, "absorbed") {
			t.Errorf("busy GPU: the claim must say the queue absorbed the wait: %s", f.Claim)
		}
	}
	// With no GPU seen, nothing is known of the GPU: the claim says so
	// rather than that the GPU stayed busy.
	s := &synth{n: 50, noGPU: true, procs: []*sProc{trainer(&sThread{cpu: constF(75), wait: constF(25)})}}
	_, fs, _ := s.judge()
	f := findingByID(fs, "launch-thread-descheduled")
	if f == nil || f.Severity != finding.Info || strings.Contains(f.Claim, "stayed busy") || !strings.Contains(f.Claim, "not known") {
		t.Errorf("no GPU seen: %+v", f)
	}
}

func TestOversubscribedBothSides(t *testing.T) {
	spinner := func(tid int, runnableEvery int) *sThread {
		return &sThread{tid: tid, comm: "python3", role: "unnamed", cpu: constF(40), wait: constF(60), state: func(tick int) byte {
			if tick%10 < runnableEvery {
				return 'R'
			}
			return 'S'
		}}
	}
	build := func(every int) *synth {
		return &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(40), wait: constF(55), state: func(int) byte { return 'R' }},
			spinner(101, every), spinner(102, every))}}
	}
	// 3 runnable on 2 CPUs in 60 % of ticks: oversubscribed.
	_, fs, _ := build(6).judge()
	f := findingByID(fs, "cpu-oversubscribed")
	if f == nil || f.Severity != finding.Warning || !strings.Contains(f.Evidence[3].Text, "unset") {
		t.Fatalf("60 %% of ticks: %+v", f)
	}
	// In 40 % of ticks only: not.
	if _, fs, _ := build(4).judge(); findingByID(fs, "cpu-oversubscribed") != nil {
		t.Error("40 % of ticks reported as oversubscribed")
	}
}

func TestOneCorePegged(t *testing.T) {
	build := func(other float64) *synth {
		return &synth{n: 50, util: constF(30), busy: func(cpu, i int) float64 {
			if cpu == 1 {
				return 95
			}
			return other
		}, procs: []*sProc{trainer(&sThread{cpu: constF(95), wait: constF(0), onCPU: 1})}}
	}
	_, fs, _ := build(10).judge()
	if f := findingByID(fs, "one-core-pegged"); f == nil || f.Subject != "cpu1" || f.Supports != finding.SubmissionBound {
		t.Errorf("cpu1 at 95 %%, cpu0 at 10 %%: %+v", f)
	}
	if _, fs, _ := build(30).judge(); findingByID(fs, "one-core-pegged") != nil {
		t.Error("cpu0 at 30 % reported as idle")
	}
}

// TestPeggedCoreOfANeighbour: cpu1 pegged at 95 % while the job's only
// thread sleeps on cpu0 (a timer, 2 % of a core): the load is another
// process's. one-core-pegged would blame the job's single thread and advise
// moving its preprocessing into workers; the neighbour is named instead.
func TestPeggedCoreOfANeighbour(t *testing.T) {
	s := &synth{n: 50, util: constF(0), busy: func(cpu, i int) float64 {
		if cpu == 1 {
			return 95
		}
		return 5
	}, procs: []*sProc{trainer(&sThread{cpu: constF(2), wait: constF(0), onCPU: 0, blocked: blockedOn("clock_nanosleep", "")})}}
	_, fs, _ := s.judge()
	if f := findingByID(fs, "one-core-pegged"); f != nil {
		t.Errorf("a neighbour's load blamed on the job: %s (%s)", f.Claim, f.Decision)
	}
	f := findingByID(fs, "core-pegged-by-neighbour")
	if f == nil || f.Severity != finding.Info || f.Supports != "" || f.Subject != "cpu1" || !strings.HasPrefix(f.Claim, "cpu1 was 100% busy while the other CPU averaged 0%") ||
		!strings.HasSuffix(f.Claim, "but the job's own threads ran only 0% of it: the load is a neighbour's (processes outside the job), not the job's") {
		t.Fatalf("%+v", f)
	}
	if e := f.Evidence[3]; e.What != "the job's own threads on cpu1, mean" || e.Value != 0 {
		t.Errorf("%+v", e)
	}
	// The same thread busy on cpu1 is the job's own pegged core.
	s.procs = []*sProc{trainer(&sThread{cpu: constF(93), wait: constF(0), onCPU: 1})}
	_, fs, _ = s.judge()
	if f := findingByID(fs, "one-core-pegged"); f == nil || !strings.Contains(f.Claim, "93% of it the job's own threads") {
		t.Errorf("%+v", f)
	}
	if findingByID(fs, "core-pegged-by-neighbour") != nil {
		t.Error("the job's own pegged core is no neighbour's")
	}
}

func TestClocks(t *testing.T) {
	// Bursts with the clock sagging between them.
	s := &synth{n: 50, util: func(i int) float64 {
		if i%2 == 0 {
			return 80
		}
		return 5
	}, clock: func(i int) float64 {
		if i%2 == 0 {
			return 1980
		}
		return 600
	}, procs: []*sProc{trainer(&sThread{cpu: constF(99), wait: constF(0)})}}
	_, fs, _ := s.judge()
	if f := findingByID(fs, "gpu-clocks-drop-between-bursts"); f == nil || f.Severity != finding.Info {
		t.Errorf("clock drop: %+v", f)
	}
	// Busy and slow: throttled.
	s = &synth{n: 50, util: constF(97), clock: constF(1200), procs: []*sProc{trainer(&sThread{cpu: constF(30), wait: constF(0)})}}
	_, fs, _ = s.judge()
	if f := findingByID(fs, "gpu-clocks-low-under-load"); f == nil || f.Severity != finding.Warning {
		t.Errorf("throttled: %+v", f)
	}
	// The same clock with the power cap named: throttled, and said why.
	powerCap := gpu.ClockEventSWPowerCap
	s.reasons = &powerCap
	if f := findingByID(firstFindings(s), "gpu-clocks-low-under-load"); f == nil || !strings.Contains(f.Claim, "SW power cap") {
		t.Errorf("power-capped: %+v", f)
	}
	// The driver read, no slowdown reason: the boost clock's choice (an
	// H100 rarely holds its maximum boost), not throttling.
	none := uint64(0)
	s.reasons = &none
	if f := findingByID(firstFindings(s), "gpu-clocks-low-under-load"); f != nil {
		t.Errorf("throttled without a slowdown reason: %s", f.Claim)
	}
	s.reasons = nil
	s.clock = constF(1700) // 86 %: fine
	if _, fs, _ = s.judge(); findingByID(fs, "gpu-clocks-low-under-load") != nil {
		t.Error("86 % of the maximum clock reported as throttled")
	}
}

func firstFindings(s *synth) []finding.Finding {
	_, fs, _ := s.judge()
	return fs
}

func TestChecksFoldedExceptWindowMeasured(t *testing.T) {
	s := &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(99), wait: constF(0)})},
		checks: []finding.Finding{
			{ID: "pcie-link", Severity: finding.Critical, Supports: finding.TransferBound, Claim: "downgraded"},
			{ID: "pressure", Severity: finding.Warning, Claim: "cpu pressure 60 %"},
		}}
	_, fs, _ := s.judge()
	if findingByID(fs, "pcie-link") == nil || findingByID(fs, "pressure") != nil {
		t.Errorf("checks: %v", fs)
	}
}

func TestLaunchThreadIdentification(t *testing.T) {
	// A busy pin-memory thread never launches; a thread seen on the device
	// beats a busier one that was not.
	helper := &sThread{tid: 101, comm: "pt_data_pin", role: "pin-memory", cpu: constF(99), wait: constF(0)}
	talker := &sThread{tid: 102, comm: "python3", role: "unnamed", cpu: constF(40), wait: constF(0), blocked: blockedOn("recvfrom", "socket:[7]")}
	main := &sThread{cpu: constF(60), wait: constF(0), blocked: blockedOn("futex", "futex 0x1")}
	s := &synth{n: 50, util: constF(50), procs: []*sProc{trainer(main, helper, talker)}}
	_, _, in := s.judge()
	if launchThread := in.Job.Launch; launchThread == nil || launchThread.T.Key.TID != 102 || !strings.Contains(launchThread.How, "blocked on the device") {
		t.Errorf("launch thread %+v", in.Job.Launch)
	}
	// Nobody on the device: the main thread.
	talker.blocked = nil
	_, _, in = s.judge()
	if launchThread := in.Job.Launch; launchThread == nil || launchThread.T.Key.TID != 100 || !strings.Contains(launchThread.How, "the main thread") {
		t.Errorf("launch thread %+v", in.Job.Launch)
	}
	// The device lists no process: the target, said so.
	s.procs[0].listed = false
	s.procs[0].channels = nil
	_, _, in = s.judge()
	if in.Job.Launch == nil || !strings.Contains(in.Job.GPUProcsHow, "the target process") {
		t.Errorf("unlisted: %+v", in.Job)
	}
}

func TestClassifyWait(t *testing.T) {
	ch := map[string]bool{"socket:[7]": true}
	for _, tc := range []struct {
		state byte
		b     *timeline.Blocked
		read  bool
		want  WaitKind
	}{
		{'D', nil, true, WaitDisk},
		{'S', nil, true, WaitUnknown},
		{'S', &timeline.Blocked{Syscall: "recvfrom", On: "socket:[7]"}, true, WaitDevice},
		{'S', &timeline.Blocked{Syscall: "sendto", On: "socket:[7]"}, true, WaitSubmit},
		{'S', &timeline.Blocked{Syscall: "ioctl", On: "/dev/nvidiactl"}, false, WaitDevice},
		{'S', &timeline.Blocked{Syscall: "recvfrom", On: "socket:[8]"}, true, WaitInput},
		{'S', &timeline.Blocked{Syscall: "recvfrom", On: "socket:[8]"}, false, WaitUnknown},
		{'S', &timeline.Blocked{Syscall: "read", On: "pipe:[3]"}, true, WaitInput},
		{'S', &timeline.Blocked{Syscall: "futex", On: "futex 0x10"}, true, WaitInput},
		{'S', &timeline.Blocked{Syscall: "clock_nanosleep"}, true, WaitTimer},
		{'S', &timeline.Blocked{Syscall: "pread64", On: "/data/x.bin"}, true, WaitDisk},
		{'S', &timeline.Blocked{Wchan: "hrtimer_nanosleep"}, true, WaitTimer},
		{'S', &timeline.Blocked{Wchan: "unix_stream_read_generic"}, true, WaitUnknown},
		{'S', &timeline.Blocked{NotVisible: "not visible: needs ptrace"}, true, WaitUnknown},
	} {
		if got := classifyWait(tc.state, tc.b, ch, tc.read); got != tc.want {
			t.Errorf("%c %+v (channels read %v): %v, want %v", tc.state, tc.b, tc.read, got, tc.want)
		}
	}
}

func TestEvidenceHasUnitsWindowsAndSources(t *testing.T) {
	s := pipeline(80, 'R', 2)
	_, fs, in := s.judge()
	frozenIDs := map[string]bool{}
	for _, f := range in.Frozen.Findings {
		frozenIDs[f.ID] = true // internal/judge/frozen's own tests hold those to their standard
	}
	for _, f := range fs {
		if frozenIDs[f.ID] {
			continue
		}
		if f.ID == "" || f.Claim == "" {
			t.Errorf("finding without id or claim: %+v", f)
		}
		for _, e := range f.Evidence {
			if e.What == "" || e.Source == "" {
				t.Errorf("%s: evidence without what or source: %+v", f.ID, e)
			}
			if e.Text == "" && e.Unit == "" && !strings.Contains(e.What, "processes") && !strings.Contains(e.What, "workers") {
				t.Errorf("%s: number without a unit: %+v", f.ID, e)
			}
		}
	}
}

// TestConfidenceFollowsTheEvidenceNotTheWindow: the same jobs judged over
// 3, 5 and 10 s: confidence comes from the evidence (how many intervals
// carry the cause, its lead over the next, the sources that agree), so it
// moves by a few points with the window, never 15; the basis says what it
// is made of, and no window length. (It was the judged time over 5 s: 60 %
// at 3 s, 100 % at 5 s.)
func TestConfidenceFollowsTheEvidenceNotTheWindow(t *testing.T) {
	jobs := map[string]func(n int) *synth{
		"gpu-bound": func(n int) *synth {
			return &synth{n: n, util: constF(96), procs: []*sProc{trainer(&sThread{cpu: constF(20), wait: constF(0), blocked: blockedOn("recvfrom", "socket:[7]")})}}
		},
		"too-little-work": func(n int) *synth {
			return &synth{n: n, util: constF(3), procs: []*sProc{trainer(&sThread{cpu: constF(4), wait: constF(0), blocked: blockedOn("clock_nanosleep", "")})}}
		},
		"stalled": func(n int) *synth {
			return &synth{n: n, noGPU: true, procs: []*sProc{trainer(&sThread{cpu: constF(0), wait: constF(0), state: func(int) byte { return 'S' },
				blocked: blockedOn("read", "pipe:[9]")})}}
		},
		"submission-bound, /proc alone": func(n int) *synth {
			return &synth{n: n, util: constF(2), procs: []*sProc{trainer(&sThread{cpu: constF(95), wait: constF(0)})}}
		},
	}
	for name, job := range jobs {
		conf := map[int]float64{}
		var class finding.Class
		for _, n := range []int{30, 50, 100} {
			v, _, _ := job(n).judge()
			if class == "" {
				class = v.Class
			}
			if v.Class != class || v.Class == finding.Inconclusive {
				t.Errorf("%s over %d intervals: %s, want %s", name, n, v.Class, class)
			}
			conf[n] = v.Confidence
			if strings.Contains(v.Basis, " s judged") || !strings.Contains(v.Basis, "intervals carry it") {
				t.Errorf("%s over %d intervals: the basis should name the intervals that carry it, not the window: %q", name, n, v.Basis)
			}
		}
		if d := math.Abs(conf[100] - conf[30]); d > 0.15 {
			t.Errorf("%s: confidence %.2f over 3 s, %.2f over 10 s: moves %.0f points with the window alone", name, conf[30], conf[100], d*100)
		}
		if conf[100] < conf[30] {
			t.Errorf("%s: more evidence, less confidence: %v", name, conf)
		}
	}
	// The evidence, not the window: a cause that carries every interval is
	// surer than one that carries two in three of them, at the same
	// window.
	clean := &synth{n: 50, util: constF(3), procs: []*sProc{trainer(&sThread{cpu: constF(4), wait: constF(0), blocked: blockedOn("clock_nanosleep", "")})}}
	mixed := &synth{n: 50, util: constF(3), procs: []*sProc{trainer(&sThread{cpu: func(i int) float64 {
		if i%3 == 0 {
			return 97
		}
		return 4
	}, wait: constF(0), blocked: blockedOn("clock_nanosleep", "")})}}
	vc, _, _ := clean.judge()
	vm, _, _ := mixed.judge()
	if vc.Class != finding.TooLittleWork || vm.Class != finding.TooLittleWork || vm.Confidence >= vc.Confidence {
		t.Errorf("a cause in every interval %s %.2f; in two of three %s %.2f: want the second lower", vc.Class, vc.Confidence, vm.Class, vm.Confidence)
	}
}

// TestInconclusiveMarksNoFinding: every way to an inconclusive verdict
// leaves its because list empty (so no finding is marked as the verdict's
// while the header says inconclusive) and its confidence 0, with a basis
// that says why.
func TestInconclusiveMarksNoFinding(t *testing.T) {
	for name, s := range map[string]*synth{
		"short window": {n: 10, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(95), wait: constF(0)})}},
		"no GPU":       {n: 50, noGPU: true, procs: []*sProc{trainer(&sThread{cpu: constF(95), wait: constF(0)})}},
		"unexplained idle": {n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(20), wait: constF(0), state: func(int) byte { return 'S' },
			blocked: func(int) *timeline.Blocked { return &timeline.Blocked{NotVisible: "needs CAP_SYS_PTRACE"} }})}},
	} {
		v, fs, _ := s.judge()
		if v.Class != finding.Inconclusive || len(v.Because) != 0 || v.Confidence != 0 || v.Basis == "" || v.Missing == "" {
			t.Errorf("%s: %+v", name, v)
		}
		for _, f := range fs {
			if f.Supports != "" && f.ID == CauseID[f.Supports] && f.Severity == finding.Critical {
				t.Errorf("%s: a critical cause finding under an inconclusive verdict: %+v", name, f)
			}
		}
	}
}

// A requested 2 s window is judged whether its ticks span 1.998 s or 2.0008 s
// (the first tick lands a few milliseconds after the start, timers fire a
// little late); a window that is short says so without contradicting itself.
func TestMinimumWindowIsJudgedAtTheRequestedDuration(t *testing.T) {
	busy := func() *sProc { return trainer(&sThread{cpu: constF(99), wait: constF(0)}) }
	for _, shift := range []time.Duration{-800 * time.Microsecond, 0, 2 * time.Millisecond, 20 * time.Millisecond} {
		s := &synth{n: thresholds.MinIntervals, util: constF(20), procs: []*sProc{busy()}}
		tl := s.timeline()
		tl.Ticks[0].T += int64(shift) // window: 2 s - shift
		a := derive.New(tl)
		v, _ := judgeVF(tl, a)
		if strings.Contains(v.Missing, "observe at least") {
			t.Errorf("a %.4f s window of a 2 s request: %q", float64(a.WindowNS)/1e9, v.Missing)
		}
	}
	// A late tick (an overrun) loses its slot: 17 intervals in a 2 s window
	// sampled at 100 ms, with overruns, are still the 20 it was sampled at.
	s := &synth{n: thresholds.MinIntervals, util: constF(20), procs: []*sProc{busy()}}
	tl := s.timeline()
	tl.Ticks = append(tl.Ticks[:10], tl.Ticks[13:]...)
	tl.Counts.Overruns = 1
	if v, _ := judgeVF(tl, derive.New(tl)); v.Class == finding.Inconclusive {
		t.Errorf("three slots lost to an overrun: %q", v.Missing)
	}
	// Without an overrun to explain it, a missing interval is missing.
	tl.Counts.Overruns = 0
	if v, _ := judgeVF(tl, derive.New(tl)); !strings.Contains(v.Missing, "but only 17 intervals were sampled; observe at least 20") {
		t.Errorf("17 intervals, no overrun: %q", v.Missing)
	}
	// Nor does a window the sampler could not keep up with count as sampled.
	tl = s.timeline()
	tl.Ticks = append(tl.Ticks[:2], tl.Ticks[13:]...)
	tl.Counts.Overruns = 1
	if v, _ := judgeVF(tl, derive.New(tl)); !strings.Contains(v.Missing, "only 9 intervals were sampled, a tick late") {
		t.Errorf("9 intervals sampled in 2 s: %q", v.Missing)
	}
	// Really short: the message gives the window so that it reads shorter
	// than what it asks for.
	s = &synth{n: thresholds.MinIntervals, util: constF(20), procs: []*sProc{busy()}}
	tl = s.timeline()
	tl.Ticks[0].T += int64(60 * time.Millisecond)
	tl.Meta.Interval = timeline.Duration(10 * time.Millisecond)
	v, _ := judgeVF(tl, derive.New(tl))
	if !strings.Contains(v.Missing, "held 1.94 s") || !strings.Contains(v.Missing, "observe at least 2s") {
		t.Errorf("1.94 s window: %q", v.Missing)
	}
}

// TestSpinningSyncAndLaunchLoopReadTheSame: a synchronisation that spins
// (CUDA's default) and a thread submitting work both read from /proc as a
// running thread in user mode. With the GPU busy 80 %, a thread on a CPU
// all the time may be a launch loop that cannot keep up or a loop that
// spins 80 % of the time waiting and computes 20 %: the verdict names
// neither class (not a wrong one, and nothing critical), says both, and
// says what would separate them. The same job with blocking
// synchronisation sleeps on the device and is sync-bound; a launch loop
// whose work provably exceeds the GPU's is submission-bound.
func TestSpinningSyncAndLaunchLoopReadTheSame(t *testing.T) {
	spinning := &synth{n: 50, util: constF(80), procs: []*sProc{trainer(&sThread{cpu: constF(99), wait: constF(0), user: 99})}}
	v, fs, in := spinning.judge()
	if v.Class != finding.Inconclusive || len(v.Because) != 0 || v.Confidence != 0 {
		t.Fatalf("saturated thread, GPU busy 80 %%: %s %v (%v), want inconclusive naming no finding", v.Class, v.Because, in.Attribution.Share)
	}
	for _, want := range []string{"submission-bound or sync-bound", "spinning in a synchronisation"} {
		if !strings.Contains(v.Summary, want) {
			t.Errorf("summary %q does not say %q", v.Summary, want)
		}
	}
	for _, want := range []string{"diagnose --pid 100 --profile on", "CAP_PERFMON and CAP_BPF", "--py-stacks", "gpufeed trace", "cudaDeviceScheduleBlockingSync"} {
		if !strings.Contains(v.Missing, want) {
			t.Errorf("missing %q does not say %q", v.Missing, want)
		}
	}
	f := findingByID(fs, "launch-thread-spins-or-submits")
	if f == nil || f.Severity == finding.Critical || f.Supports != "" || math.Abs(in.Attribution.Share[SpinOrSubmit]-20) > 0.01 {
		t.Fatalf("finding %+v, shares %v: want a non-critical finding of no class, all 20 idle points spin-or-submit", f, in.Attribution.Share)
	}
	for _, f := range fs {
		if f.Severity == finding.Critical {
			t.Errorf("a critical finding on an ambiguous job: %+v", f)
		}
	}
	// A launch loop that happens to give the same readings gets the same
	// verdict: nothing in /proc separates it.
	loop := &synth{n: 50, util: constF(80), procs: []*sProc{trainer(&sThread{cpu: constF(99), wait: constF(0), user: 99})}}
	if v2, _, _ := loop.judge(); v2.Class != v.Class || v2.Summary != v.Summary {
		t.Errorf("the same readings, another verdict: %+v", v2)
	}
	// The same job with blocking synchronisation: asleep on the device
	// 80 % of the time, sync-bound.
	blocking := &synth{n: 50, util: constF(80), procs: []*sProc{trainer(&sThread{cpu: constF(20), wait: constF(0), blocked: blockedOn("recvmsg", "socket:[7]")})}}
	if v, _, _ := blocking.judge(); v.Class != finding.SyncBound {
		t.Errorf("blocking synchronisation: %s, want sync-bound", v.Class)
	}
	// The spinning job on a crowded CPU: it runs 36 % and waits for a CPU
	// 64 %, the GPU busy 40 %. All its running time could be a spin, but
	// whichever it did, while it waited to run it could neither launch nor
	// notice that the GPU had finished: 64 % of the 60 idle points are the
	// launch thread descheduled (submission-bound, a CPU of its own first),
	// the other 21.6 stay either.
	crowded := &synth{n: 50, util: constF(40), procs: []*sProc{trainer(&sThread{cpu: constF(36), wait: constF(64), user: 99})}}
	v, fs, in = crowded.judge()
	if f := findingByID(fs, "launch-thread-saturated"); v.Class != finding.SubmissionBound || f == nil || !strings.Contains(f.Decision, "CPU of its own") ||
		math.Abs(in.Attribution.Share[finding.SubmissionBound]-38.4) > 0.01 || math.Abs(in.Attribution.Share[SpinOrSubmit]-21.6) > 0.01 {
		t.Errorf("descheduled spinner: %s shares %v, finding %+v; want submission-bound 38.4 (a CPU of its own first) and 21.6 either", v.Class, in.Attribution.Share, f)
	}
	// A launch loop with the GPU busy 27 %: a spin could have taken 27 of
	// its 100 points; its work (73) is 2.7 times the GPU's, so at least
	// 63 of the 73 idle points are submission whatever it did.
	launch := &synth{n: 50, util: constF(27), procs: []*sProc{trainer(&sThread{cpu: constF(99), wait: constF(1), user: 99})}}
	v, fs, in = launch.judge()
	if v.Class != finding.SubmissionBound || in.Attribution.Share[finding.SubmissionBound] < 60 || findingByID(fs, "launch-thread-spins-or-submits") == nil {
		t.Errorf("launch loop, GPU busy 27 %%: %s shares %v, want submission-bound from 60 points and the rest named", v.Class, in.Attribution.Share)
	}
}

// TestSaturatedClaimInABusyPhase: a launch thread saturated for the first
// second of a quiet five-second window is blamed for that second's idle
// time; the claim gives its times in those intervals, not the window's
// means (which read "no time left to submit work (it ran 21% of the
// time)").
func TestSaturatedClaimInABusyPhase(t *testing.T) {
	phase := func(busy, quiet float64) func(int) float64 {
		return func(i int) float64 {
			if i < 10 {
				return busy
			}
			return quiet
		}
	}
	s := &synth{n: 50, util: phase(3, 97), procs: []*sProc{trainer(&sThread{cpu: phase(99, 1), wait: constF(0), user: 99})}}
	_, fs, in := s.judge()
	f := findingByID(fs, "launch-thread-saturated")
	if f == nil {
		t.Fatalf("no launch-thread-saturated finding (shares %v)", in.Attribution.Share)
	}
	for _, want := range []string{"in the 10 of 50 intervals where the GPU idled because of it, it ran 99% of the time", "over the whole window"} {
		if !strings.Contains(f.Claim, want) {
			t.Errorf("claim %q does not say %q", f.Claim, want)
		}
	}
}

// Only pools of workers are sized against the cores: one multiprocessing
// worker is "1 worker process"; a child the job started for something
// else (a shell's sleep) is no worker.
func TestWorkersAgainstCoresCountsOnlyWorkers(t *testing.T) {
	_, fs, _ := pipeline(26, 'R', 1).judge()
	if w := findingByID(fs, "dataloader-workers-vs-cores"); w == nil || w.Claim != "1 worker process for 2 CPUs" {
		t.Errorf("one worker: %+v", w)
	}
	s := pipeline(26, 'R', 1)
	s.procs[1].role = "child"
	if _, fs, _ := s.judge(); findingByID(fs, "dataloader-workers-vs-cores") != nil {
		t.Errorf("a plain child counted as a worker: %+v", findingByID(fs, "dataloader-workers-vs-cores"))
	}
	// Its environment not visible (another user's job): it may be a rank
	// its launcher forked, and the claim says so.
	s = pipeline(26, 'R', 1)
	s.procs[1].hidden = map[string]string{"env": "not visible: needs CAP_SYS_PTRACE"}
	_, fs, _ = s.judge()
	if w := findingByID(fs, "dataloader-workers-vs-cores"); w == nil ||
		w.Claim != "1 worker process for 2 CPUs; it may be a rank rather than a worker: its environment, where a launcher names each rank (RANK), is not visible" {
		t.Errorf("one worker, environment not visible: %+v", w)
	}
}

// TestConfidenceOfTheSameJobAt3And10s: the same job, as the sampler reads
// it, judged over 3 s and 10 s states confidences within a few points. As
// the sampler reads it: its first sight of a thread reads no wait (the
// first slow tick holds none), and one interval in ten the launch thread
// ran (a burst of requests), so a tenth of the intervals carry another
// cause. Two terms grew with the window alone: the tick that read no wait
// counted as a wait somewhere unknown (one reading of four over 3 s, one
// of eleven over 10 s, that much of the sleep unexplained), and the bound
// over the intervals that carry the cause counted every interval as an
// independent reading (27 of 30 gave 76 %, 90 of 100 84 %). Before: the
// service 55 % at 3 s, 70 % at 10 s, the sync-bound loop 54 % and 70 %, the
// GPU-bound one 77 % and 84 %; each term alone moved them 6 to 10 points.
func TestConfidenceOfTheSameJobAt3And10s(t *testing.T) {
	bursty := func(i int) float64 {
		if i%10 == 9 {
			return 97
		}
		return 4
	}
	jobs := map[string]func(n int) *synth{
		"too-little-work, a futex": func(n int) *synth {
			return &synth{n: n, firstSight: true, util: constF(3), procs: []*sProc{trainer(&sThread{cpu: bursty, wait: constF(0),
				blocked: blockedOn("futex", "futex 0x5562")})}}
		},
		"too-little-work, a timer": func(n int) *synth {
			return &synth{n: n, firstSight: true, util: constF(3), procs: []*sProc{trainer(&sThread{cpu: bursty, wait: constF(0),
				blocked: blockedOn("clock_nanosleep", "")})}}
		},
		"gpu-bound, a sync every 50 ms": func(n int) *synth {
			return &synth{n: n, firstSight: true, util: func(i int) float64 {
				if i%10 == 9 {
					return 85
				}
				return 97
			}, procs: []*sProc{trainer(&sThread{cpu: constF(5), wait: constF(0), blocked: blockedOn("recvfrom", "socket:[7]")})}}
		},
		"sync-bound": func(n int) *synth {
			return &synth{n: n, firstSight: true, util: constF(40), procs: []*sProc{trainer(&sThread{cpu: bursty, wait: constF(0),
				blocked: blockedOn("recvfrom", "socket:[7]")})}}
		},
	}
	for name, job := range jobs {
		v3, _, _ := job(30).judge()
		v10, _, _ := job(100).judge()
		if v3.Class != v10.Class || v3.Class == finding.Inconclusive {
			t.Errorf("%s: %s over 3 s, %s over 10 s", name, v3.Class, v10.Class)
			continue
		}
		if d := math.Abs(v10.Confidence - v3.Confidence); d > 0.05 {
			t.Errorf("%s (%s): %.0f%% over 3 s, %.0f%% over 10 s: the same evidence, %.0f points apart\n 3 s: %s\n10 s: %s",
				name, v3.Class, v3.Confidence*100, v10.Confidence*100, d*100, v3.Basis, v10.Basis)
		}
	}
}

// TestNotStillSaysWhatItCouldNotSee: with no GPU reading, a job whose only
// movement is one thread woken out of waits whose kind was not visible is
// not called stalled, and the report says why, and that a timer would read
// the same, rather than that the job moved.
func TestNotStillSaysWhatItCouldNotSee(t *testing.T) {
	in := &Input{}
	in.Frozen.Progress.Judged, in.Frozen.Progress.LiveProcs = true, 1
	m := &in.Frozen.Progress.Measure
	m.WokenTID, m.WokenCount, m.WokenReadings, m.WokenUnseen, m.WokenSlices = 780, 40, 40, 40, 90
	m.WokenNotVisible = "syscall not visible: needs CAP_SYS_PTRACE"
	got := notStill(in)
	for _, want := range []string{"a thread kept being woken (tid 780 was woken in 40 of its 40 readings, out of a wait whose kind was not visible",
		"does not call the job stalled or idle", "run gpufeed with the privilege that shows where each thread waits"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "moved") || strings.Contains(got, "no timeout") {
		t.Errorf("%q claims what was not seen", got)
	}
	m.WokenUnseen = 0
	if got := notStill(in); !strings.Contains(got, "the job moved over the window (tid 780 was woken out of a wait with no timeout in 40 of its 40 readings)") {
		t.Errorf("seen waits: %q", got)
	}
}
