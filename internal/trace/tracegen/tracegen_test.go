package tracegen_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/tracegen"
)

// causeOf maps the generator's host activities to the attribution's causes.
var causeOf = map[tracegen.Cause]tracestats.Cause{
	tracegen.CauseSync:       tracestats.CauseSync,
	tracegen.CausePageable:   tracestats.CausePageableCopy,
	tracegen.CauseDataLoader: tracestats.CauseDataLoader,
	tracegen.CauseLaunchAPI:  tracestats.CauseLaunchAPI,
	tracegen.CauseCPUOps:     tracestats.CauseCPUOps,
	tracegen.CauseUntraced:   tracestats.CauseUntraced,
	tracegen.CauseLatency:    tracestats.CauseLaunchLatency,
	tracegen.CauseSetup:      tracestats.CauseSetup,
}

// TestAttributionMatchesGroundTruth generates traces whose gap causes are
// known by construction and checks that the analysis attributes every
// nanosecond of GPU idle time to the right cause, and reaches the class the
// pattern was built to produce.
func TestAttributionMatchesGroundTruth(t *testing.T) {
	want := map[tracegen.Pattern]finding.Class{
		tracegen.Healthy:    finding.GPUBound,
		tracegen.DataLoader: finding.Preprocessing,
		tracegen.Sync:       finding.SyncBound,
		tracegen.Pageable:   finding.TransferBound,
		tracegen.Launch:     finding.SubmissionBound,
		tracegen.Mixed:      "",
	}
	for sc, class := range want {
		for _, ns := range []bool{false, true} {
			for _, seed := range []uint64{1, 2} {
				t.Run(fmt.Sprintf("%s/ns=%v/seed=%d", sc, ns, seed), func(t *testing.T) {
					var buf bytes.Buffer
					truth, err := tracegen.Generate(&buf, tracegen.Config{Pattern: sc, Steps: 6, NsResolution: ns, Seed: seed, Rank: -1})
					if err != nil {
						t.Fatal(err)
					}
					tr, err := kineto.Decode(&buf, "gen.json", kineto.Options{Workers: 3, ChunkBytes: 64 << 10})
					if err != nil {
						t.Fatal(err)
					}
					if len(tr.Warnings) > 0 {
						t.Fatalf("warnings: %q", tr.Warnings)
					}
					r := tracejudge.Analyze(tr, tracejudge.Options{})
					at := r.Attribution
					if at.SpanNs != truth.SpanNs {
						t.Errorf("span = %d ns, generator says %d", at.SpanNs, truth.SpanNs)
					}
					for gc, ac := range causeOf {
						if got, w := at.ByCause[ac], truth.IdleByCause[gc]; got != w {
							t.Errorf("%s: attributed %d ns, generator says %d", ac, got, w)
						}
					}
					if at.IdleNs != truth.IdleNs() {
						t.Errorf("idle = %d ns, generator says %d", at.IdleNs, truth.IdleNs())
					}
					if at.AfterSyncNs != truth.AfterSyncNs {
						t.Errorf("after-sync idle = %d ns, generator says %d", at.AfterSyncNs, truth.AfterSyncNs)
					}
					if class != "" && r.Verdict.Class != class {
						t.Errorf("verdict %s (%s), want %s", r.Verdict.Class, r.Verdict.Summary, class)
					}
				})
			}
		}
	}
}

// TestRepeatAndTargetBytes: steps made large (few long steps, as profiler
// schedules record) are still attributed exactly, and Steps with
// TargetBytes sizes the steps to fill about that many bytes.
func TestRepeatAndTargetBytes(t *testing.T) {
	var buf bytes.Buffer
	truth, err := tracegen.Generate(&buf, tracegen.Config{Pattern: tracegen.Mixed, Steps: 6, TargetBytes: 8 << 20, Seed: 5, Rank: -1})
	if err != nil {
		t.Fatal(err)
	}
	if truth.Bytes < 6<<20 || truth.Bytes > 11<<20 {
		t.Errorf("6 steps sized for 8 MiB wrote %d bytes", truth.Bytes)
	}
	tr, err := kineto.Decode(&buf, "gen.json", kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := tracejudge.Analyze(tr, tracejudge.Options{}).Attribution
	for gc, ac := range causeOf {
		if got, w := at.ByCause[ac], truth.IdleByCause[gc]; got != w {
			t.Errorf("%s: attributed %d ns, generator says %d", ac, got, w)
		}
	}
}

// TestSetupLaunchGroundTruth adds one 20 ms first launch of a new kernel
// (module loading) to patterns whose class it must not change: its idle is
// attributed to set-up to the nanosecond and stays out of every share that
// decides the class.
func TestSetupLaunchGroundTruth(t *testing.T) {
	for sc, class := range map[tracegen.Pattern]finding.Class{
		tracegen.Launch:     finding.SubmissionBound,
		tracegen.Sync:       finding.SyncBound,
		tracegen.DataLoader: finding.Preprocessing,
	} {
		t.Run(string(sc), func(t *testing.T) {
			var buf bytes.Buffer
			truth, err := tracegen.Generate(&buf, tracegen.Config{Pattern: sc, Steps: 6, Seed: 3, Rank: -1, SetupLaunchNs: 20_000_000})
			if err != nil {
				t.Fatal(err)
			}
			if truth.IdleByCause[tracegen.CauseSetup] != 20_000_000 {
				t.Fatalf("generator charged %d ns to set-up, want the whole 20 ms launch", truth.IdleByCause[tracegen.CauseSetup])
			}
			tr, err := kineto.Decode(&buf, "gen.json", kineto.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := tracejudge.Analyze(tr, tracejudge.Options{})
			for gc, ac := range causeOf {
				if got, w := r.Attribution.ByCause[ac], truth.IdleByCause[gc]; got != w {
					t.Errorf("%s: attributed %d ns, generator says %d", ac, got, w)
				}
			}
			if len(r.SetupLaunches.Calls) != 1 || r.SetupLaunches.Calls[0].Kernel != "void first_use_kernel<float>(float*, int)" {
				t.Errorf("set-up launches %+v, want the one first_use_kernel launch", r.SetupLaunches.Calls)
			}
			want := 100 * float64(truth.IdleByCause[tracegen.CauseSetup]) / float64(truth.SpanNs)
			if d := r.Shares.Setup - want; d > 1e-9 || d < -1e-9 {
				t.Errorf("set-up share %.4f %%, want %.4f %%", r.Shares.Setup, want)
			}
			if r.Verdict.Class != class {
				t.Errorf("verdict %s (%s), want %s", r.Verdict.Class, r.Verdict.Summary, class)
			}
		})
	}
}

// TestConfidenceFallsWithEvidence: the same workload profiled for one step
// or for seven (the last of 2 and 8 steps is dropped) gets the same class,
// but the short trace's confidence is at most half; a cause seen in a
// single gap is no verdict at all.
func TestConfidenceFallsWithEvidence(t *testing.T) {
	conf := func(sc tracegen.Pattern, steps int) finding.Verdict {
		var buf bytes.Buffer
		if _, err := tracegen.Generate(&buf, tracegen.Config{Pattern: sc, Steps: steps, Seed: 1, Rank: -1}); err != nil {
			t.Fatal(err)
		}
		tr, err := kineto.Decode(&buf, "gen.json", kineto.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return tracejudge.Analyze(tr, tracejudge.Options{}).Verdict
	}
	for _, sc := range []tracegen.Pattern{tracegen.Launch, tracegen.Sync, tracegen.Healthy} {
		short, long := conf(sc, 2), conf(sc, 8)
		if short.Class != long.Class {
			t.Errorf("%s: %s from one step, %s from seven", sc, short.Class, long.Class)
		}
		if short.Confidence > 0.5 || long.Confidence < 0.9 {
			t.Errorf("%s: confidence %.2f from one step, %.2f from seven; want at most 0.5 and at least 0.9", sc, short.Confidence, long.Confidence)
		}
	}
	// Three steps, two analysed: the DataLoader stall shows in one gap only
	// (the first step's comes before any GPU work).
	if v := conf(tracegen.DataLoader, 3); v.Class != finding.Inconclusive {
		t.Errorf("dataloader, one stall in the window: %s (%.2f), want inconclusive", v.Class, v.Confidence)
	}
	if v := conf(tracegen.DataLoader, 8); v.Class != finding.Preprocessing || v.Confidence < 0.8 {
		t.Errorf("dataloader, six stalls: %s (%.2f), want preprocessing-bound at 0.8 or more", v.Class, v.Confidence)
	}
}
