package judge

import (
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// A saturated launch thread, the same /proc picture each time; its CPU
// profile alone decides which class the split finding supports, with the
// shares in the claim.
func TestCPUSplitByProfile(t *testing.T) {
	for _, tc := range []struct {
		cats  map[profile.Category]int
		top   profile.SymbolSamples
		want  finding.Class
		claim string
	}{
		// (the GPU idles 70%: the thread's work after each sync, 40% of
		// its CPU, is what leaves it idle)
		{map[profile.Category]int{profile.DriverSync: 60, profile.Interpreter: 32, profile.DriverLaunch: 8},
			profile.SymbolSamples{Symbol: "cuStreamSynchronize", File: "libcuda.so.1", Category: profile.DriverSync, Samples: 60},
			finding.SyncBound, "60% of the launch thread's CPU inside cuStreamSynchronize (spinning)"},
		{map[profile.Category]int{profile.DriverLaunch: 40, profile.Interpreter: 35, profile.Framework: 25},
			profile.SymbolSamples{Symbol: "cuLaunchKernel", File: "libcuda.so.1", Category: profile.DriverLaunch, Samples: 40},
			finding.SubmissionBound, "40% of the launch thread's CPU in cuLaunchKernel"},
		{map[profile.Category]int{profile.Decode: 60, profile.Interpreter: 30, profile.DriverLaunch: 2, profile.Other: 8},
			profile.SymbolSamples{Symbol: "inflate", File: "libz.so.1", Category: profile.Decode, Samples: 60},
			finding.Preprocessing, "60% of the launch thread's CPU in decoding"},
		// Mixed, nothing dominant: no class is named, but launch calls
		// under a tenth veto submission-bound.
		{map[profile.Category]int{profile.DriverSync: 30, profile.DriverLaunch: 5, profile.Other: 65}, profile.SymbolSamples{},
			"", "only 5% of the launch thread's CPU in launch calls"},
	} {
		s := &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(97), wait: constF(0)})}}
		tl := s.timeline()
		a := derive.New(tl)
		in := NewInput(tl, a)
		th := in.Job.Launch.T
		n := 0
		for _, v := range tc.cats {
			n += v
		}
		tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
			Threads: []profile.ThreadCPU{{PID: th.PID, TID: th.Key.TID, Samples: n, Categories: tc.cats, Top: []profile.SymbolSamples{tc.top}}}}
		v, fs := judgeVF(tl, derive.New(tl))
		f := findingByID(fs, "launch-thread-cpu-split")
		if tc.want == "" {
			if f == nil || f.Supports != "" || !strings.Contains(f.Claim, tc.claim) {
				t.Errorf("mixed profile: want a finding naming no class, with %q; got %+v", tc.claim, f)
			}
			if v.Class == finding.SubmissionBound {
				t.Errorf("mixed profile with 5%% in launch calls: verdict %s %q", v.Class, v.Summary)
			}
			continue
		}
		if f == nil || f.Supports != tc.want || !strings.Contains(f.Claim, tc.claim) {
			t.Errorf("want %s with %q, got %+v", tc.want, tc.claim, f)
		}
		// The verdict takes the class the profile names, and says why (a
		// submission-bound one with its own /proc cause, the split beside).
		if v.Class != tc.want || (tc.want != finding.SubmissionBound && !strings.Contains(v.Summary, tc.claim)) {
			t.Errorf("verdict %s %q, want %s from the profile", v.Class, v.Summary, tc.want)
		}
		// The intervals /proc gave to submission carry the class the
		// profile names: its confidence is the evidence's, not 0.
		if v.Confidence < 0.5 {
			t.Errorf("verdict %s at %.2f: %s", v.Class, v.Confidence, v.Basis)
		}
	}
	// Without a profile (not allowed, or an older recording) nothing changes.
	s := &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(97), wait: constF(0)})}}
	_, fs, _ := s.judge()
	if findingByID(fs, "launch-thread-cpu-split") != nil {
		t.Error("a split without a profile")
	}
}

// A GPU kept busy all but just over a tenth of the time (a crowded host
// delaying the relaunch after each synchronisation), its launch thread
// spinning in the synchronisation throughout, as a GPU-bound job with
// CUDA's default spin does: the spin is the wait for a busy GPU, not its
// bottleneck. No sync-bound split, and the verdict stays what /proc says.
func TestCPUSplitSpinOnABusyGPUIsNotSyncBound(t *testing.T) {
	s := &synth{n: 50, util: constF(88), procs: []*sProc{trainer(&sThread{cpu: constF(97), wait: constF(0)})}}
	tl := s.timeline()
	in := NewInput(tl, derive.New(tl))
	th := in.Job.Launch.T
	tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
		Threads: []profile.ThreadCPU{{PID: th.PID, TID: th.Key.TID, Samples: 300,
			Categories: map[profile.Category]int{profile.DriverSync: 296, profile.Interpreter: 4},
			Top:        []profile.SymbolSamples{{Symbol: "wait_until", File: "libgpufeed-simcuda.so", Category: profile.DriverSync, Samples: 296}}}}}
	v, fs := judgeVF(tl, derive.New(tl))
	if f := findingByID(fs, "launch-thread-cpu-split"); f != nil && f.Supports == finding.SyncBound {
		t.Errorf("a spin on a GPU busy 88%% of the time is called sync-bound: %s", f.Claim)
	}
	if v.Class == finding.SyncBound {
		t.Errorf("verdict %s: %s", v.Class, v.Summary)
	}
}

// The launch thread spinning in its syncs whenever it runs, but waiting
// for a CPU more than half the time (a crowded host): the profile saw only
// its running time, spinning, with no launch calls: neither sync-bound (its
// work after each sync is too little to leave the GPU idle this long) nor
// submission-bound (it launched under a tenth of its CPU: the profile
// vetoes it). The verdict names neither and says a CPU of its own comes
// first. (It was submission-bound against its own profile.)
func TestCPUSplitLeavesTheWaitForACPU(t *testing.T) {
	s := &synth{n: 50, util: constF(45), procs: []*sProc{trainer(&sThread{cpu: constF(42), wait: constF(56)})}}
	tl := s.timeline()
	in := NewInput(tl, derive.New(tl))
	th := in.Job.Launch.T
	tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
		Threads: []profile.ThreadCPU{{PID: th.PID, TID: th.Key.TID, Samples: 200,
			Categories: map[profile.Category]int{profile.DriverSync: 196, profile.Interpreter: 4},
			Top:        []profile.SymbolSamples{{Symbol: "wait_until", File: "libgpufeed-simcuda.so", Category: profile.DriverSync, Samples: 196}}}}}
	v, fs := judgeVF(tl, derive.New(tl))
	if v.Class == finding.SubmissionBound || v.Class == finding.SyncBound {
		t.Errorf("verdict %s: %s; want neither (the thread spun when it ran, and waited for a CPU 56%%)\n%v", v.Class, v.Summary, fs)
	}
	if !strings.Contains(v.Missing, "a CPU of its own comes first") || !strings.Contains(v.Missing, "only 0% in launch calls") {
		t.Errorf("the verdict does not say what the profile saw and what comes first: %q", v.Missing)
	}
}

// profiled judges a saturated launch thread (GPU busy 3 %) with the CPU
// profile given.
func profiled(cats map[profile.Category]int, top ...profile.SymbolSamples) (*finding.Verdict, []finding.Finding) {
	s := &synth{n: 50, util: constF(3), procs: []*sProc{trainer(&sThread{cpu: constF(97), wait: constF(0)})}}
	tl := s.timeline()
	in := NewInput(tl, derive.New(tl))
	th := in.Job.Launch.T
	n := 0
	for _, v := range cats {
		n += v
	}
	tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
		Threads: []profile.ThreadCPU{{PID: th.PID, TID: th.Key.TID, Samples: n, Categories: cats, Top: top}}}
	return judgeVF(tl, derive.New(tl))
}

// A decoder whose CPU goes mostly to the kernel (zlib inflating into fresh
// buffers: brk, mmap and the page faults of the first write), none to
// launch calls: the kernel's time on its behalf is its own work, and the
// verdict is preprocessing-bound. (It stayed submission-bound: decoding,
// copies and the interpreter held under half its samples, and nothing
// counted the kernel's.)
func TestCPUSplitKernelTimeIsTheThreadsOwnWork(t *testing.T) {
	v, fs := profiled(map[profile.Category]int{profile.Kernel: 183, profile.Decode: 90, profile.Interpreter: 21, profile.DriverOther: 6},
		profile.SymbolSamples{Symbol: "inflate", File: "libz.so.1", Category: profile.Decode, Samples: 90})
	f := findingByID(fs, "launch-thread-cpu-split")
	if f == nil || f.Supports != finding.Preprocessing || !strings.Contains(f.Claim, "61% in the kernel on its own behalf") {
		t.Fatalf("want a preprocessing-bound split counting the kernel's 61%%, got %+v", f)
	}
	if v.Class != finding.Preprocessing || v.Confidence < 0.8 {
		t.Errorf("verdict %s at %.2f: %s; want preprocessing-bound, carried by the intervals /proc gave to submission (basis %s)", v.Class, v.Confidence, v.Summary, v.Basis)
	}
}

// The profile vetoes submission-bound: launch calls under a tenth of the
// thread's samples, the rest in the interpreter and framework (no input
// work for certain): no class is named from the profile, and the verdict
// is not submission-bound; it says what the profile saw. With a tenth or
// more in launch calls it is submission-bound.
func TestCPUSplitVetoesSubmissionUnderATenth(t *testing.T) {
	v, fs := profiled(map[profile.Category]int{profile.DriverLaunch: 7, profile.Interpreter: 60, profile.Framework: 33})
	f := findingByID(fs, "launch-thread-cpu-split")
	if f == nil || f.Supports != "" || !strings.Contains(f.Claim, "only 7% of the launch thread's CPU in launch calls") {
		t.Errorf("want the profile's veto, got %+v", f)
	}
	if v.Class == finding.SubmissionBound {
		t.Errorf("verdict %s (%.2f): %s, while the profile shows 7%% in launch calls", v.Class, v.Confidence, v.Summary)
	}
	if !strings.Contains(v.Missing, "only 7% of the launch thread's CPU in launch calls") {
		t.Errorf("the verdict does not say what the profile saw: %q", v.Missing)
	}
	v, _ = profiled(map[profile.Category]int{profile.DriverLaunch: 12, profile.Interpreter: 55, profile.Framework: 33})
	if v.Class != finding.SubmissionBound {
		t.Errorf("12%% in launch calls: verdict %s, want submission-bound", v.Class)
	}
}

// The driver calls alone: 67 launches a second from a thread running 97 %
// of the time is 14 ms of CPU per launch, no launch loop: the driver calls
// do not confirm submission, and the verdict says the busy-thread classes
// cannot be told apart. (They named submission-bound.)
func TestDriverCallsFewLaunchesForTheCPUAreNoLaunchLoop(t *testing.T) {
	tl := saturatedAt(3).timeline()
	tl.Meta.DriverCalls = driverOf(100, 335, 0, 0)
	v, fs := judgeVF(tl, derive.New(tl))
	if f := findingByID(fs, "launch-thread-driver-calls"); f != nil && f.Supports == finding.SubmissionBound {
		t.Errorf("67 launches a second confirm submission: %s", f.Claim)
	}
	if v.Confidence > thresholds.IndistinctMaxConfidence || !strings.Contains(v.Summary, "cannot tell submission-bound from preprocessing-bound") {
		t.Errorf("verdict %s (%.2f): %s", v.Class, v.Confidence, v.Summary)
	}
	// 12,000 launches a second: a launch loop, confirmed.
	tl = saturatedAt(3).timeline()
	tl.Meta.DriverCalls = driverOf(100, 60000, 5, 1e8)
	if v, _ = judgeVF(tl, derive.New(tl)); v.Class != finding.SubmissionBound || v.Confidence <= thresholds.IndistinctMaxConfidence {
		t.Errorf("a launch loop the driver calls confirm: %s (%.2f): %s", v.Class, v.Confidence, v.Summary)
	}
}

// Without any probe that saw what the saturated thread ran, the verdict
// says which classes cannot be told apart and the cheapest way to tell
// them, on its first lines (summary and what to do), with a confidence
// of at most a third. (It was submission-bound at 100 %, the note behind
// -v.)
func TestBusyThreadWithoutProbesSaysWhatCannotBeToldApart(t *testing.T) {
	tl := saturatedAt(3).timeline()
	tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateUnavailable, Missing: "sampling every CPU needs CAP_PERFMON"}
	v, _ := judgeVF(tl, derive.New(tl))
	if v.Class != finding.SubmissionBound || v.Confidence > thresholds.IndistinctMaxConfidence {
		t.Errorf("verdict %s at %.2f, want submission-bound at most %.2f", v.Class, v.Confidence, thresholds.IndistinctMaxConfidence)
	}
	for _, want := range []string{"cannot tell submission-bound from preprocessing-bound (its own input work) or sync-bound (a spinning sync)"} {
		if !strings.Contains(v.Summary, want) {
			t.Errorf("summary lacks %q: %s", want, v.Summary)
		}
	}
	for _, want := range []string{"CAP_PERFMON", "--py-stacks", "this run could not take"} {
		if !strings.Contains(v.Missing, want) {
			t.Errorf("what to do lacks %q: %s", want, v.Missing)
		}
	}
	if strings.Contains(v.Decision, "fuse kernels (torch.compile), capture the step") {
		t.Errorf("the decision acts on one reading: %s", v.Decision)
	}
}

// A third of the thread's samples in the driver, none of them placed as a
// launch or a sync (a spin inside an unexported function, or a driver
// whose symbols could not be read), the rest in the interpreter: that is
// not the thread's own input work. The split names no class and the
// verdict is not preprocessing-bound. (A spinning sync loop, its driver
// samples unplaced on a crowded host, was preprocessing-bound at 91 %.)
func TestCPUSplitUnplacedDriverTimeIsNoOwnWork(t *testing.T) {
	v, fs := profiled(map[profile.Category]int{profile.DriverOther: 34, profile.Interpreter: 60, profile.Kernel: 6})
	if f := findingByID(fs, "launch-thread-cpu-split"); f != nil && f.Supports == finding.Preprocessing {
		t.Errorf("unplaced driver time read as own work: %+v", f)
	}
	if v.Class == finding.Preprocessing {
		t.Errorf("verdict %s (%.2f): %s", v.Class, v.Confidence, v.Summary)
	}
	// With the driver's share small, the same interpreter-heavy thread
	// with few launches is still its own work.
	if v, _ := profiled(map[profile.Category]int{profile.DriverOther: 4, profile.Interpreter: 60, profile.Kernel: 30, profile.Decode: 6}); v.Class != finding.Preprocessing {
		t.Errorf("little driver time: %s, want preprocessing-bound", v.Class)
	}
}

// A thread spinning in its syncs whose samples put only 47 % there and 48 %
// in the kernel (as one of three observers of one window did, on a loaded
// virtual machine): the driver probes timed it inside its syncs 78 % of
// the window while it ran 99 % of it, so at least 78 % of its CPU was the
// spin, and the split says sync-bound with the timing, not
// preprocessing-bound from the samples. Without the probes' timing the
// samples decide. A thread that sleeps in its syncs gets no floor.
func TestCPUSplitSyncTimedByTheProbesOutweighsItsSamples(t *testing.T) {
	cats := map[profile.Category]int{profile.DriverSync: 188, profile.Kernel: 193, profile.Interpreter: 19, profile.DriverLaunch: 2}
	top := profile.SymbolSamples{Symbol: "wait_until", File: "libgpufeed-simcuda.so", Category: profile.DriverSync, Samples: 186}
	judgeWith := func(cpu float64, d *profile.DriverCalls) (*finding.Verdict, *finding.Finding) {
		s := &synth{n: 50, util: constF(79), procs: []*sProc{trainer(&sThread{cpu: constF(cpu), wait: constF(0)})}}
		tl := s.timeline()
		in := NewInput(tl, derive.New(tl))
		th := in.Job.Launch.T
		tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
			Threads: []profile.ThreadCPU{{PID: th.PID, TID: th.Key.TID, Samples: 402, Categories: cats, Top: []profile.SymbolSamples{top}}}}
		if d != nil {
			d.Threads[0].PID, d.Threads[0].TID = th.PID, th.Key.TID
		}
		tl.Meta.DriverCalls = d
		v, fs := judgeVF(tl, derive.New(tl))
		return v, findingByID(fs, "launch-thread-cpu-split")
	}
	v, f := judgeWith(99, driverOf(0, 800, 985, 3.9e9))
	if f == nil || f.Supports != finding.SyncBound ||
		!strings.Contains(f.Claim, "78% of the launch thread's CPU inside wait_until (spinning), as the driver probes timed them (its samples put 47% there)") {
		t.Fatalf("want a sync-bound split from the probes' timing; got %+v", f)
	}
	if v.Class != finding.SyncBound {
		t.Errorf("verdict %s: %s", v.Class, v.Summary)
	}
	timed := false
	for _, e := range f.Evidence {
		timed = timed || strings.HasPrefix(e.What, "launch thread CPU inside the driver's synchronisations, timed by the driver probes") && e.Value >= 77 && e.Value <= 79
	}
	if !timed {
		t.Errorf("the probes' timing is not in the evidence: %+v", f.Evidence)
	}
	// The samples alone: preprocessing-bound (what the observer said).
	if _, f := judgeWith(99, nil); f == nil || f.Supports != finding.Preprocessing {
		t.Errorf("without the probes' timing the samples decide; got %+v", f)
	}
	// Asleep in its syncs (on a CPU 20 % of the window, in them 78 %): no
	// floor. On a CPU 30 %, at least 8 % of the window was spent spinning
	// in them: 27 % of its CPU.
	if floorCPU := syncCPUFloorOf(20, 0.78); floorCPU != 0 {
		t.Errorf("a thread on a CPU 20%% of the window, in syncs 78%%: floor %.2f, want 0", floorCPU)
	}
	if floorCPU := syncCPUFloorOf(30, 0.78); floorCPU < 0.26 || floorCPU > 0.27 {
		t.Errorf("a thread on a CPU 30%% of the window, in syncs 78%%: floor %.3f, want 0.267", floorCPU)
	}
}

// syncCPUFloorOf is syncCPUFloor for a thread on a CPU cpu % of the window
// and inside syncs inSync of it.
func syncCPUFloorOf(cpu, inSync float64) float64 {
	s := &synth{n: 50, util: constF(79), procs: []*sProc{trainer(&sThread{cpu: constF(cpu), wait: constF(0)})}}
	tl := s.timeline()
	in := NewInput(tl, derive.New(tl))
	th := in.Job.Launch.T
	d := driverOf(th.Key.TID, 800, 985, int64(inSync*5e9))
	tl.Meta.DriverCalls = d
	return syncCPUFloor(in, th)
}

// The launch thread's profile all interpreter (its own work), but it
// waited for a CPU 75% of the time and ran 20% (a crowded host; no CPU
// limit): the idle time passed with it waiting to run, so its own work is
// not named, and the split says a CPU of its own comes first. The same
// profile on a thread that ran 97% is preprocessing-bound. (A throttled
// sync loop on a crowded host was called preprocessing-bound this way.)
func TestCPUSplitOwnWorkOfAStarvedThreadIsNotPreprocessing(t *testing.T) {
	cats := map[profile.Category]int{profile.Interpreter: 190, profile.Kernel: 4, profile.DriverLaunch: 6}
	for _, c := range []struct {
		cpu, wait float64
		want      finding.Class
	}{{20, 75, ""}, {97, 0, finding.Preprocessing}} {
		s := &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(c.cpu), wait: constF(c.wait)})}}
		tl := s.timeline()
		in := NewInput(tl, derive.New(tl))
		th := in.Job.Launch.T
		tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
			Threads: []profile.ThreadCPU{{PID: th.PID, TID: th.Key.TID, Samples: 200, Categories: cats}}}
		v, fs := judgeVF(tl, derive.New(tl))
		f := findingByID(fs, "launch-thread-cpu-split")
		if f == nil || f.Supports != c.want {
			t.Errorf("ran %.0f%%, waited %.0f%%: split %+v, want it to support %q", c.cpu, c.wait, f, c.want)
			continue
		}
		t.Logf("ran %.0f%%, waited %.0f%%: %s (%.0f%%): %s; to conclude: %s", c.cpu, c.wait, v.Class, v.Confidence*100, v.Summary, v.Missing)
		if c.want == "" {
			if v.Class == finding.Preprocessing || !strings.Contains(f.Claim, "a CPU of its own comes first") {
				t.Errorf("ran %.0f%%, waited %.0f%%: verdict %s (%s); split %q", c.cpu, c.wait, v.Class, v.Summary, f.Claim)
			}
		} else if v.Class != c.want {
			t.Errorf("ran %.0f%%, waited %.0f%%: verdict %s, want %s: %s", c.cpu, c.wait, v.Class, c.want, v.Summary)
		}
	}
}
