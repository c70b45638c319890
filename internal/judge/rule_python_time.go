package judge

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func init() {
	register(Rule{ID: "python-time", Title: "Where the launch (or busiest) thread's Python time goes: DataLoader, transforms, .item(), optimizer, GIL",
		// Sources: 004 (The GIL: py-spy top --pid PID --gil)
		Run: runPythonTime})
}

// The Python-side stages a feeding thread spends its time in, told from
// the sampled stacks (diagnose --py-stacks): the frames of PyTorch's own
// modules, and for .item() the source text of the user's line (it is a C
// call, so no Python frame shows it).
var (
	dataloaderNext = func(f profile.Frame) bool {
		return f.Function == "__next__" && strings.HasSuffix(f.File, "torch/utils/data/dataloader.py")
	}
	// workerWait is the multi-process iterator waiting for its workers'
	// next batch (_MultiProcessingDataLoaderIter._get_data and
	// _try_get_data, torch/utils/data/dataloader.py since PyTorch 1.2):
	// only there is the thread waiting on workers.
	workerWait = func(f profile.Frame) bool {
		return (f.Function == "_get_data" || f.Function == "_try_get_data") && strings.HasSuffix(f.File, "torch/utils/data/dataloader.py")
	}
	// inThreadFetch is the Dataset fetcher (torch/utils/data/_utils/fetch.py:
	// the Dataset's __getitem__ and collate) run by the iterating thread
	// itself: a DataLoader without workers (num_workers=0). With workers
	// the fetcher runs in the worker processes, never in this thread.
	inThreadFetch = func(f profile.Frame) bool {
		return strings.HasSuffix(f.File, "torch/utils/data/_utils/fetch.py")
	}
	transformFile = regexp.MustCompile(`(^|/)transforms?(/|\.py$)|/albumentations/|/kornia/augmentation/`)
	isTransform   = func(f profile.Frame) bool { return transformFile.MatchString(f.File) }
	isOptimizer   = func(f profile.Frame) bool {
		return strings.Contains(f.File, "/torch/optim/") || f.Function == "step" && strings.Contains(f.File, "/optim")
	}
	// syncCall is a call that waits for the GPU to copy a value back: each
	// one is a host-device synchronisation.
	syncCall = regexp.MustCompile(`\.(item|cpu|tolist|numpy)\(\)`)
)

// pySamples reads the sampled Tops in the timeline, by pid.
func pySamples(tl *timeline.Timeline) map[int]profile.PySamples {
	out := map[int]profile.PySamples{}
	for _, e := range tl.Events {
		if e.Kind != timeline.EventPySamples {
			continue
		}
		if t, err := profile.ParsePySamples(e.Text); err == nil {
			out[t.PID] = t
		}
	}
	return out
}

// runPythonTime: with the job's Python stacks sampled, the thread that feeds
// the GPU (the launch thread; without a GPU in view, the busiest Python
// thread) is split into the stages that usually starve it, like
// `py-spy top` read by an expert: waiting on the DataLoader's __next__ (the
// workers do not keep up), transforms run in the main process, .item() and
// other copies back to the host (a synchronisation each), the optimizer
// step; and who holds the GIL.
func runPythonTime(in *Input) []finding.Finding {
	tops := pySamples(in.Timeline)
	if len(tops) == 0 {
		return nil
	}
	var top profile.PySamples
	var th *profile.PySampleThread
	how := ""
	if launchThread := in.Job.Launch; launchThread != nil {
		if t, ok := tops[launchThread.T.PID]; ok {
			for i := range t.Threads {
				if t.Threads[i].TID == launchThread.T.Key.TID {
					top, th, how = t, &t.Threads[i], "the launch thread ("+launchThread.How+")"
				}
			}
		}
	}
	if th == nil {
		// Without a launch thread in view: the main thread of the job's
		// trainer (or a rank), the thread that runs the training loop;
		// else the busiest Python thread.
		roles := map[int]string{}
		for k, p := range in.Timeline.Procs {
			roles[k.PID] = p.Role
		}
		pids := make([]int, 0, len(tops))
		for pid := range tops {
			pids = append(pids, pid)
		}
		sort.Ints(pids)
		for _, pid := range pids {
			if r := roles[pid]; r != "trainer" && r != "rank" {
				continue
			}
			t := tops[pid]
			for i := range t.Threads {
				if t.Threads[i].TID == pid {
					top, th, how = t, &t.Threads[i], "the main thread of the training process (no GPU process was seen to tell the launch thread)"
				}
			}
			if th != nil {
				break
			}
		}
	}
	if th == nil {
		for _, pid := range func() []int {
			ps := make([]int, 0, len(tops))
			for pid := range tops {
				ps = append(ps, pid)
			}
			sort.Ints(ps)
			return ps
		}() {
			t := tops[pid]
			for i := range t.Threads {
				if th == nil || t.Threads[i].Active > th.Active {
					top, th = t, &t.Threads[i]
				}
			}
		}
		how = "the busiest Python thread (most samples running)"
	}
	if th == nil || th.Samples == 0 {
		return nil
	}
	who := fmt.Sprintf("thread %d (%s) of pid %d", th.TID, th.Name, top.PID)
	window := fmt.Sprintf("%d samples at %.0f Hz over %.1f s", th.Samples, top.RateHz, top.Seconds)
	src := "sampled Python stacks (" + top.Reader + ")"
	pct := func(n int) float64 { return 100 * float64(n) / float64(th.Samples) }

	// The DataLoader's __next__ is two stages: waiting there for the
	// workers' next batch, or (a DataLoader without workers) running the
	// Dataset's __getitem__ and collate in this thread, where the thread
	// waits on nothing. Transforms run there are that loading's content.
	wait := stackShare(th, func(fr []profile.Frame) bool { return hasFrame(fr, dataloaderNext) && hasFrame(fr, workerWait) })
	fetch := stackShare(th, func(fr []profile.Frame) bool { return hasFrame(fr, dataloaderNext) && hasFrame(fr, inThreadFetch) })
	tf := th.Share(isTransform)
	tfChange := "run the transforms in DataLoader workers (inside the Dataset's __getitem__), or on the GPU on whole batches"
	if tfFetch := stackShare(th, func(fr []profile.Frame) bool { return hasFrame(fr, isTransform) && hasFrame(fr, inThreadFetch) }); 2*tfFetch.Samples > tf.Samples {
		tfChange = "they run in the Dataset's __getitem__ in this thread because the DataLoader has no workers (num_workers=0): set num_workers (within the cores) so worker processes run them, with persistent_workers=True, or run them on the GPU on whole batches"
	}
	const (
		stageFetch     = 1
		stageTransform = 2
	)
	stages := []struct {
		name   string
		share  profile.Share
		change string
	}{
		{"waiting on the DataLoader's __next__", wait,
			"the DataLoader's workers do not keep up: raise num_workers (within the cores), set persistent_workers=True and prefetch_factor, pin_memory=True, and move per-sample work out of the collate function"},
		{"loading batches itself in the DataLoader's __next__ (no workers: the Dataset's __getitem__ and collate in this thread)", fetch,
			"the DataLoader has no workers (num_workers=0), so the thread that should feed the GPU reads and prepares every sample: set num_workers (within the cores) with persistent_workers=True and pin_memory=True"},
		{"in transforms run by this thread", tf, tfChange},
		{"in the optimizer step", th.Share(isOptimizer),
			"use the fused or foreach optimizer implementations (torch.optim.AdamW(..., fused=True) or foreach=True), which launch a few large kernels instead of one per parameter"},
	}
	item := profile.Share{Of: th.Samples, OfActive: th.Active}
	var itemLines []string
	for _, l := range th.Lines {
		if syncCall.MatchString(l.Source) {
			item.Samples += l.Samples
			item.Active += l.Active
			itemLines = append(itemLines, fmt.Sprintf("%s:%d %s", l.File, l.Line, l.Source))
		}
	}
	stages = append(stages, struct {
		name   string
		share  profile.Share
		change string
	}{"at a line copying a value back to the host (.item(), .cpu(), .tolist(), .numpy())", item,
		"each such call waits for the GPU to finish everything queued: accumulate on the GPU and call .item() every N steps, or log asynchronously"})

	// Sources: 004 (The GIL: py-spy top --pid PID --gil)
	f := finding.Finding{ID: "python-time", Severity: finding.Info, Subject: who}
	f.Evidence = append(f.Evidence, evText("sampled thread", who+": "+how, window, src))
	var parts []string
	lead, leadPct := -1, 0.0
	for i, s := range stages {
		p := pct(s.share.Samples)
		f.Evidence = append(f.Evidence, ev("share of the thread's samples "+s.name, p, "%", window, src))
		if s.share.Samples > 0 {
			parts = append(parts, fmt.Sprintf("%.0f %% %s", p, s.name))
		}
		if p > leadPct {
			lead, leadPct = i, p
		}
	}
	if len(itemLines) > 0 {
		f.Evidence = append(f.Evidence, evText("lines copying back to the host", safeText(strings.Join(itemLines, "; ")), window, src))
	}
	// py-spy top's table: the functions with the most samples
	var tops5 []string
	for i, fs := range th.FunctionShares() {
		if i == 5 {
			break
		}
		tops5 = append(tops5, fmt.Sprintf("%s (%s) %.0f %% total, %.0f %% own", fs.Function, fs.File, pct(fs.Total), pct(fs.Own)))
	}
	f.Evidence = append(f.Evidence, evText("functions with the most samples (total: anywhere on the stack; own: innermost)", safeText(strings.Join(tops5, "; ")), window, src))
	gil := pct(th.GIL)
	f.Evidence = append(f.Evidence, ev("share of the thread's samples holding the GIL", gil, "%", window, src))
	holder := gilHolder(top, th.TID)
	if holder != nil {
		f.Evidence = append(f.Evidence, ev(fmt.Sprintf("share of samples thread %d (%s) held the GIL", holder.TID, holder.Name), 100*float64(holder.GIL)/float64(max(holder.Samples, 1)), "%", window, src))
	}

	f.Claim = fmt.Sprintf("Python time of %s: %.0f %% of its samples running, %.0f %% holding the GIL", who, pct(th.Active), gil)
	if len(parts) > 0 {
		f.Claim += "; " + strings.Join(parts, ", ")
	}
	if holder != nil {
		f.Claim += fmt.Sprintf("; thread %d (%s) held the GIL in %.0f %% of its samples", holder.TID, holder.Name, 100*float64(holder.GIL)/float64(max(holder.Samples, 1)))
	}
	// Transforms inside the thread's own loading are where that loading's
	// time goes: the narrower stage leads when it is large enough itself.
	if lead == stageFetch && pct(stages[stageTransform].share.Samples) >= thresholds.PythonStageSharePct {
		lead, leadPct = stageTransform, pct(stages[stageTransform].share.Samples)
	}
	if lead >= 0 && leadPct >= thresholds.PythonStageSharePct {
		f.Severity = finding.Warning
		f.Decision = fmt.Sprintf("The thread spends %.0f %% of its time %s: %s.", leadPct, stages[lead].name, stages[lead].change)
	} else if holder != nil && th.Active < th.Samples/2 {
		f.Decision = fmt.Sprintf("Thread %d (%s) holds the GIL most of the time: move its work out of Python threads (into worker processes, or into calls that release the GIL).", holder.TID, holder.Name)
	}
	return []finding.Finding{f}
}

// gilHolder is the other thread of the process that held the GIL in the
// most samples, when that is at least GILHolderSharePct of its samples.
func gilHolder(t profile.PySamples, except int) *profile.PySampleThread {
	var best *profile.PySampleThread
	for i := range t.Threads {
		th := &t.Threads[i]
		if th.TID == except || th.Samples == 0 || 100*float64(th.GIL)/float64(th.Samples) < thresholds.GILHolderSharePct {
			continue
		}
		if best == nil || th.GIL > best.GIL {
			best = th
		}
	}
	return best
}

// safeText caps evidence text built from the target's names (the
// renderers escape it).
func safeText(s string) string {
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}

// hasFrame says whether a stack holds a frame match accepts.
func hasFrame(fr []profile.Frame, match func(profile.Frame) bool) bool {
	for _, f := range fr {
		if match(f) {
			return true
		}
	}
	return false
}

// stackShare counts the samples whose whole stack match accepts.
func stackShare(th *profile.PySampleThread, match func([]profile.Frame) bool) profile.Share {
	s := profile.Share{Of: th.Samples, OfActive: th.Active}
	for _, st := range th.Stacks {
		if match(st.Frames) {
			s.Samples += st.Samples
			s.Active += st.Active
		}
	}
	return s
}
