package judge

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// saturatedTrainer is a job whose launch thread is on a CPU all the time
// while the GPU runs 30 %: /proc alone cannot tell a spinning sync from a
// launch loop.
func saturatedTrainer() *synth { return saturatedAt(30) }

func saturatedAt(util float64) *synth {
	return &synth{n: 50, util: constF(util), procs: []*sProc{trainer(&sThread{cpu: constF(97), wait: constF(0)})}}
}

func driverOf(tid int, launches, syncs uint64, syncNS int64) *profile.DriverCalls {
	d := &profile.DriverCalls{State: profile.StateOn, WindowNS: 5e9, LaunchProbedNS: 5e9, LaunchContinuous: true,
		Threads: []profile.ThreadDriver{{PID: 100, TID: tid, Comm: "python3", Calls: []profile.DriverCall{
			{Symbol: "cuLaunchKernel", Class: profile.CallLaunch, Calls: launches},
			{Symbol: "cuStreamSynchronize", Class: profile.CallSync, Calls: syncs, TimeNS: syncNS}}}}}
	d.Threads[0].Sum()
	return d
}

// The driver calls alone (no CPU profile) split the saturated thread's
// time: inside syncs most of the window is sync-bound, with the syncs'
// pace in the claim; launching with few syncs is submission-bound; in
// between, nothing is claimed.
func TestDriverCallsSplitTheSaturatedThread(t *testing.T) {
	for _, tc := range []struct {
		util            float64
		launches, syncs uint64
		syncNS          int64
		want            finding.Class
		claim           string
	}{
		// Spinning 72 % of the window in syncs, the GPU idle 30 % (the
		// work between syncs).
		{70, 2000, 500, 3.6e9, finding.SyncBound, "inside the CUDA driver's synchronisations 72% of the window (cuStreamSynchronize, 100 syncs a second, 7.2ms each, one every 4 launches)"},
		// The same with the GPU idle 15 %: what a GPU-bound job with a
		// spinning sync looks like; no claim.
		{85, 2000, 500, 3.6e9, "", ""},
		// In syncs 90 % while the GPU idles 70 %: the 10 % of work between
		// syncs cannot leave it idle that long; the thread waited for
		// something else; no claim.
		{30, 2000, 500, 4.5e9, "", ""},
		{30, 60000, 5, 1e8, finding.SubmissionBound, "launched 12000 kernels a second and was inside the CUDA driver's synchronisations only 2% of the window"},
		{30, 20000, 100, 1.5e9, "", ""},
	} {
		tl := saturatedAt(tc.util).timeline()
		tl.Meta.DriverCalls = driverOf(100, tc.launches, tc.syncs, tc.syncNS)
		v, fs := judgeVF(tl, derive.New(tl))
		f := findingByID(fs, "launch-thread-driver-calls")
		if tc.want == "" {
			if f != nil {
				t.Errorf("%.0f%% in syncs, GPU at %.0f%%: want no claim, got %+v", 100*float64(tc.syncNS)/5e9, tc.util, f)
			}
			continue
		}
		if f == nil || f.Supports != tc.want || !strings.Contains(f.Claim, tc.claim) {
			t.Fatalf("want %s with %q, got %+v", tc.want, tc.claim, f)
		}
		if v.Class != tc.want {
			t.Errorf("verdict %s (%s), want %s from the driver calls", v.Class, v.Summary, tc.want)
		}
		if tc.want == finding.SyncBound && !strings.Contains(v.Summary, "72% of the window") {
			t.Errorf("the sync-bound verdict's sentence is the driver calls' claim: %q", v.Summary)
		}
		if !containsID(v.Because, "launch-thread-driver-calls") {
			t.Errorf("the verdict's evidence lacks the driver calls: %v", v.Because)
		}
	}
	// Without them, /proc alone: neither class.
	tl := saturatedTrainer().timeline()
	if v, _ := judgeVF(tl, derive.New(tl)); v.Class == finding.SyncBound {
		t.Errorf("no driver calls: %s", v.Class)
	}
}

// Few launches on the thread's CPU profile: its own preprocessing, which
// the driver calls' lack of syncs must not call submission-bound.
func TestDriverCallsDeferToAProfileOfFewLaunches(t *testing.T) {
	tl := saturatedTrainer().timeline()
	tl.Meta.DriverCalls = driverOf(100, 500, 5, 1e8)
	tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
		Threads: []profile.ThreadCPU{{PID: 100, TID: 100, Samples: 100, Categories: map[profile.Category]int{profile.Decode: 70, profile.Interpreter: 28, profile.DriverLaunch: 2}}}}
	v, fs := judgeVF(tl, derive.New(tl))
	if f := findingByID(fs, "launch-thread-driver-calls"); f != nil {
		t.Errorf("got %+v", f)
	}
	if v.Class != finding.Preprocessing {
		t.Errorf("verdict %s, want preprocessing-bound from the profile", v.Class)
	}
}

func syscallsOfThread(pid, tid int, comm string, rows ...profile.SyscallStat) profile.ThreadSyscalls {
	th := profile.ThreadSyscalls{PID: pid, TID: tid, Comm: comm, Syscalls: rows}
	for _, r := range rows {
		th.Calls += r.Calls
		th.TimeNS += r.TimeNS
	}
	return th
}

func TestIoctlsInTheLoop(t *testing.T) {
	tl := saturatedTrainer().timeline()
	tl.Meta.Syscalls = &profile.SyscallSummary{State: profile.StateOn, WindowNS: 5e9, Threads: []profile.ThreadSyscalls{
		syscallsOfThread(100, 100, "python3", profile.SyscallStat{Name: "ioctl", Calls: 25000, TimeNS: 1e9})}}
	tl.Meta.DriverCalls = &profile.DriverCalls{State: profile.StateOn, WindowNS: 5e9, LaunchProbedNS: 5e9, LaunchContinuous: true,
		Threads: []profile.ThreadDriver{{PID: 100, TID: 100, Calls: []profile.DriverCall{{Symbol: "cuMemAlloc_v2", Class: profile.CallAlloc, Calls: 1000},
			{Symbol: "cuMemFree_v2", Class: profile.CallFree, Calls: 1000}}}}}
	tl.Meta.DriverCalls.Threads[0].Sum()
	_, fs := judgeVF(tl, derive.New(tl))
	f := findingByID(fs, "thread-ioctls-in-loop")
	if f == nil || f.Severity != finding.Warning || !strings.Contains(f.Claim, "the launch thread python3 (pid 100, main thread) made 5000 ioctl calls a second that succeeded (20% of the window inside ioctls)") {
		t.Fatalf("got %+v", f)
	}
	if !strings.Contains(evidenceText(f), "CUDA allocations and frees: 400 /s") {
		t.Errorf("evidence: %s", evidenceText(f))
	}
	// 900 a second: nothing.
	tl.Meta.Syscalls.Threads[0].Syscalls[0].Calls = 4500
	if _, fs := judgeVF(tl, derive.New(tl)); findingByID(fs, "thread-ioctls-in-loop") != nil {
		t.Error("900 ioctls a second named")
	}
	// 5000 a second of which 4000 failed (Python's open() asking each file
	// whether it is a terminal: TCGETS, ENOTTY): 200 a second succeeded.
	tl.Meta.Syscalls.Threads[0].Syscalls[0] = profile.SyscallStat{Name: "ioctl", Calls: 25000, Errors: 24000, TimeNS: 1e7}
	if _, fs := judgeVF(tl, derive.New(tl)); findingByID(fs, "thread-ioctls-in-loop") != nil {
		t.Error("failed ioctls counted as the driver's")
	}
	// 5000 successful ioctls a second from a process that holds no GPU
	// device file and was not seen in the driver: not the driver's.
	tl.Meta.Syscalls.Threads[0].Syscalls[0] = profile.SyscallStat{Name: "ioctl", Calls: 25000, TimeNS: 1e9}
	tl.Meta.DriverCalls = nil
	if _, fs := judgeVF(tl, derive.New(tl)); findingByID(fs, "thread-ioctls-in-loop") != nil {
		t.Error("ioctls of a process with no GPU device file named as the driver's")
	}
	// The same process holding /dev/nvidia0 and /dev/nvidiactl: named.
	for k, p := range tl.Procs {
		if k.PID == 100 {
			p.DeviceChannels = &timeline.DeviceChannels{Channels: []string{"/dev/nvidiactl", "/dev/nvidia0"}}
		}
	}
	if _, fs := judgeVF(tl, derive.New(tl)); findingByID(fs, "thread-ioctls-in-loop") == nil {
		t.Error("the driver's device files held: the ioctls should be named")
	}
}

func TestFutexDominatedLaunchThreadNamesItsWaker(t *testing.T) {
	tl := saturatedTrainer().timeline()
	main := syscallsOfThread(100, 100, "python3", profile.SyscallStat{Name: "futex", Calls: 300, TimeNS: 2e9})
	main.InProgress = &profile.PendingSyscall{Name: "futex", SinceNS: 1e9}
	tl.Meta.Syscalls = &profile.SyscallSummary{State: profile.StateOn, WindowNS: 5e9, Threads: []profile.ThreadSyscalls{main},
		Futexes: []profile.FutexWord{
			{PID: 100, Addr: 0x55aa10, WaitNS: 3e9, Waiters: []profile.FutexThread{{TID: 100, Calls: 300, TimeNS: 3e9}},
				Wakers: []profile.FutexThread{{TID: 104, Comm: "pt_autograd_0", Calls: 299}}},
			{PID: 100, Addr: 0x55aa50, WaitNS: 4e9, Waiters: []profile.FutexThread{{TID: 105, Calls: 3, TimeNS: 4e9}}}}}
	_, fs := judgeVF(tl, derive.New(tl))
	f := findingByID(fs, "thread-futex-dominated")
	if f == nil || !strings.Contains(f.Claim, "inside futex waits 60% of the window, mostly on one word that thread 104 (pt_autograd_0) woke 299 times") {
		t.Fatalf("got %+v", f)
	}
	if !strings.Contains(evidenceText(f), "woken on futex word 0x55aa10 (waited 3s there): tid 104 pt_autograd_0 (299 wakes)") {
		t.Errorf("evidence: %s", evidenceText(f))
	}
	main.Syscalls[0].TimeNS = 1e9 // 40 %
	tl.Meta.Syscalls.Threads[0] = main
	if _, fs := judgeVF(tl, derive.New(tl)); findingByID(fs, "thread-futex-dominated") != nil {
		t.Error("40% in futex named")
	}
}

func TestMainThreadPollsTheDataLoader(t *testing.T) {
	s := &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(10), wait: constF(0)})}}
	w := &sProc{pid: 200, ppid: 100, role: "dataloader-worker", cpus: "0-1",
		threads: []*sThread{{tid: 200, comm: "pt_data_worker", role: "main", cpu: constF(95), wait: constF(0)}}}
	s.procs = append(s.procs, w)
	tl := s.timeline()
	tl.Meta.Syscalls = &profile.SyscallSummary{State: profile.StateOn, WindowNS: 5e9, Threads: []profile.ThreadSyscalls{
		syscallsOfThread(100, 100, "python3", profile.SyscallStat{Name: "poll", Calls: 900, TimeNS: 2.5e9}, profile.SyscallStat{Name: "read", Calls: 1800, TimeNS: 1e8})}}
	_, fs := judgeVF(tl, derive.New(tl))
	f := findingByID(fs, "main-thread-polls-dataloader")
	if f == nil || !strings.Contains(f.Claim, "was inside polls and reads of its 1 DataLoader workers' queues 52% of the window (poll 900, read 1800)") {
		t.Fatalf("got %+v", f)
	}
	// No workers: nothing.
	tl = saturatedTrainer().timeline()
	tl.Meta.Syscalls = &profile.SyscallSummary{State: profile.StateOn, WindowNS: 5e9, Threads: []profile.ThreadSyscalls{
		syscallsOfThread(100, 100, "python3", profile.SyscallStat{Name: "poll", Calls: 900, TimeNS: 2.5e9})}}
	if _, fs := judgeVF(tl, derive.New(tl)); findingByID(fs, "main-thread-polls-dataloader") != nil {
		t.Error("named without workers")
	}
}

func evidenceText(f *finding.Finding) string {
	var parts []string
	for _, e := range f.Evidence {
		if e.Text != "" {
			parts = append(parts, e.What+": "+e.Text)
		} else {
			parts = append(parts, e.What+": "+strconv.FormatFloat(e.Value, 'f', -1, 64)+" "+e.Unit)
		}
	}
	return strings.Join(parts, "; ")
}
