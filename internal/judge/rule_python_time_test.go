package judge

import (
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The stacks of PyTorch 1.13's DataLoader, innermost first, as the sampler
// keeps them (function and file; no line).
var (
	dl       = "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py"
	fetchPy  = "/usr/lib/python3/dist-packages/torch/utils/data/_utils/fetch.py"
	tfPy     = "/usr/lib/python3/dist-packages/torchvision/transforms/transforms.py"
	trainPy  = "/job/train.py"
	loopTail = []profile.Frame{{Function: "main", File: trainPy}, {Function: "<module>", File: trainPy}}
	// waiting for workers: the multi-process iterator's _get_data
	workerWaitStack = append([]profile.Frame{{Function: "poll", File: "/usr/lib/python3.11/multiprocessing/connection.py"},
		{Function: "get", File: "/usr/lib/python3.11/multiprocessing/queues.py"},
		{Function: "_try_get_data", File: dl}, {Function: "_get_data", File: dl}, {Function: "_next_data", File: dl},
		{Function: "__next__", File: dl}}, loopTail...)
	// a DataLoader without workers running the Dataset's transforms itself
	fetchTransformStack = append([]profile.Frame{{Function: "forward", File: tfPy}, {Function: "__call__", File: tfPy},
		{Function: "__getitem__", File: "/usr/lib/python3/dist-packages/torchvision/datasets/fakedata.py"},
		{Function: "<listcomp>", File: fetchPy}, {Function: "fetch", File: fetchPy}, {Function: "_next_data", File: dl},
		{Function: "__next__", File: dl}}, loopTail...)
	// the same loader, in its collate (no transform)
	fetchCollateStack = append([]profile.Frame{{Function: "default_collate", File: "/usr/lib/python3/dist-packages/torch/utils/data/_utils/collate.py"},
		{Function: "fetch", File: fetchPy}, {Function: "_next_data", File: dl}, {Function: "__next__", File: dl}}, loopTail...)
	// the single-process iterator choosing indices: neither a wait nor a fetch
	samplerStack = append([]profile.Frame{{Function: "__iter__", File: "/usr/lib/python3/dist-packages/torch/utils/data/sampler.py"},
		{Function: "_next_index", File: dl}, {Function: "_next_data", File: dl}, {Function: "__next__", File: dl}}, loopTail...)
	// transforms on a batch in the loop
	batchTransformStack = append([]profile.Frame{{Function: "forward", File: tfPy}, {Function: "_call_impl", File: "/usr/lib/python3/dist-packages/torch/nn/modules/module.py"}}, loopTail...)
	modelStack          = append([]profile.Frame{{Function: "_call_impl", File: "/usr/lib/python3/dist-packages/torch/nn/modules/module.py"}}, loopTail...)
)

func pythonTimeOf(t *testing.T, stacks map[*[]profile.Frame]int) *finding.Finding {
	t.Helper()
	s := &synth{n: 50, util: constF(30), procs: []*sProc{trainer(&sThread{cpu: constF(97), wait: constF(0)})}}
	tl := s.timeline()
	th := NewInput(tl, derive.New(tl)).Job.Launch.T
	top := profile.PySamples{PID: th.PID, Python: "3.11.2", Reader: "test", RateHz: 50, Seconds: 5, Rounds: 250}
	tt := profile.PySampleThread{TID: th.Key.TID, Name: "python3"}
	for st, n := range stacks {
		tt.Stacks = append(tt.Stacks, profile.PySampleStack{Frames: *st, Samples: n, Active: n})
		tt.Samples += n
		tt.Active += n
	}
	top.Threads = []profile.PySampleThread{tt}
	text, err := profile.FormatPySamples(top)
	if err != nil {
		t.Fatal(err)
	}
	tl.Events = append(tl.Events, timeline.Event{T: tl.Ticks[len(tl.Ticks)-1].T, Kind: timeline.EventPySamples, PID: th.PID, Text: text})
	_, fs := judgeVF(tl, derive.New(tl))
	f := findingByID(fs, "python-time")
	if f == nil {
		t.Fatal("no python-time finding")
	}
	return f
}

// The DataLoader's __next__ is a wait only where the multi-process iterator
// waits for its workers; a DataLoader without workers runs the Dataset in
// the thread itself, and transforms there lead with the change to give it
// workers. Transforms on batches in the loop keep their own change.
func TestPythonTimeDataLoaderStages(t *testing.T) {
	for _, c := range []struct {
		name     string
		stacks   map[*[]profile.Frame]int
		decision string // the change's beginning
		claimNot string
	}{
		{"workers do not keep up", map[*[]profile.Frame]int{&workerWaitStack: 80, &modelStack: 20},
			"The thread spends 80 % of its time waiting on the DataLoader's __next__: the DataLoader's workers do not keep up", "loading batches itself"},
		{"no workers, transforms", map[*[]profile.Frame]int{&fetchTransformStack: 60, &fetchCollateStack: 20, &samplerStack: 5, &modelStack: 15},
			"The thread spends 60 % of its time in transforms run by this thread: they run in the Dataset's __getitem__ in this thread because the DataLoader has no workers (num_workers=0): set num_workers", "waiting on the DataLoader"},
		{"no workers, collate", map[*[]profile.Frame]int{&fetchCollateStack: 70, &fetchTransformStack: 10, &modelStack: 20},
			"The thread spends 80 % of its time loading batches itself in the DataLoader's __next__", "waiting on the DataLoader"},
		{"batch transforms", map[*[]profile.Frame]int{&batchTransformStack: 60, &samplerStack: 5, &fetchCollateStack: 5, &modelStack: 30},
			"The thread spends 60 % of its time in transforms run by this thread: run the transforms in DataLoader workers", "waiting on the DataLoader"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := pythonTimeOf(t, c.stacks)
			if f.Severity != finding.Warning || !strings.HasPrefix(f.Decision, c.decision) {
				t.Errorf("%s %q\nwant the change to begin %q", f.Severity, f.Decision, c.decision)
			}
			if strings.Contains(f.Claim, c.claimNot) {
				t.Errorf("the claim %q says %q", f.Claim, c.claimNot)
			}
		})
	}
}
