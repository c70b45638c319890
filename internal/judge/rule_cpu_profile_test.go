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
		{map[profile.Category]int{profile.DriverSync: 72, profile.Interpreter: 20, profile.DriverLaunch: 8},
			profile.SymbolSamples{Symbol: "cuStreamSynchronize", File: "libcuda.so.1", Category: profile.DriverSync, Samples: 72},
			finding.SyncBound, "72% of the launch thread's CPU inside cuStreamSynchronize (spinning)"},
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
