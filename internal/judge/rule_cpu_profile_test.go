package judge

import (
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
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
		// Mixed, nothing dominant: no split is claimed.
		{map[profile.Category]int{profile.DriverSync: 30, profile.DriverLaunch: 5, profile.Other: 65}, profile.SymbolSamples{},
			"", ""},
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
		v, fs := Judge(tl, derive.New(tl))
		f := findingByID(fs, "launch-thread-cpu-split")
		if tc.want == "" {
			if f != nil {
				t.Errorf("mixed profile: want no split, got %+v", f)
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
	v, fs := Judge(tl, derive.New(tl))
	if f := findingByID(fs, "launch-thread-cpu-split"); f != nil && f.Supports == finding.SyncBound {
		t.Errorf("a spin on a GPU busy 88%% of the time is called sync-bound: %s", f.Claim)
	}
	if v.Class == finding.SyncBound {
		t.Errorf("verdict %s: %s", v.Class, v.Summary)
	}
}

// The launch thread spinning in its syncs whenever it runs, but waiting
// for a CPU more than half the time (a crowded host): the profile saw only
// its running time, so the part it waited stays submission-bound, with a
// CPU of its own first; the spin does not take the verdict.
func TestCPUSplitLeavesTheWaitForACPU(t *testing.T) {
	s := &synth{n: 50, util: constF(45), procs: []*sProc{trainer(&sThread{cpu: constF(42), wait: constF(56)})}}
	tl := s.timeline()
	in := NewInput(tl, derive.New(tl))
	th := in.Job.Launch.T
	tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
		Threads: []profile.ThreadCPU{{PID: th.PID, TID: th.Key.TID, Samples: 200,
			Categories: map[profile.Category]int{profile.DriverSync: 196, profile.Interpreter: 4},
			Top:        []profile.SymbolSamples{{Symbol: "wait_until", File: "libgpufeed-simcuda.so", Category: profile.DriverSync, Samples: 196}}}}}
	v, fs := Judge(tl, derive.New(tl))
	if v.Class != finding.SubmissionBound {
		t.Errorf("verdict %s: %s; want submission-bound (the thread waited for a CPU 56%%)\n%v", v.Class, v.Summary, fs)
	}
}
