package frozen

import (
	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Result is everything this package concluded about one timeline.
type Result struct {
	Progress Progress
	Blocked  []BlockedThread
	Deaths   []Death
	Workers  []WorkerGroup
	// COW is what each fork group's workers copied of the memory they
	// inherited (only groups whose smaps were read).
	COW      []COWLevel
	Findings []finding.Finding
	// Unseen is set when nothing moved but the stall is not confirmed: no
	// death, lost GPU, thread stuck in the kernel or spinning GPU explains
	// it, and where the threads wait was not visible (no thread seen in a
	// wait a stall is made of: a lock, a peer, the device, the disk). A
	// job stuck and one waiting for work or for time to pass then read
	// the same: the verdict is inconclusive, saying how to tell them apart.
	Unseen bool
	// UnseenHow says how to read the waits that were not visible.
	UnseenHow string
}

// Analyze runs every frozen-job and memory/limit analysis over a timeline
// and its analysis (built here when a is nil). Findings come most important
// first: the stall, who died, what is missing, the kernel's reports, where
// threads wait, then the settings and limits.
func Analyze(tl *timeline.Timeline, a *derive.View) Result {
	return AnalyzeKernel(tl, a, kernlog.FromTimeline(tl.Events, tl.Meta.Started))
}

// AnalyzeKernel is Analyze over the timeline's kernel log lines as the
// caller recognised them (kernlog.FromTimeline): the judge recognises
// each line once and every analysis reads that.
func AnalyzeKernel(tl *timeline.Timeline, a *derive.View, kernel []kernlog.Event) Result {
	if a == nil {
		a = derive.New(tl)
	}
	v := newViewWith(tl, kernel)
	cpus := v.threadCPUs()
	r := Result{Blocked: BlockedThreads(v), Deaths: Deaths(v)}
	r.Progress = measureProgress(v, r.Deaths)
	stalled := r.Progress.Stalled()
	r.Workers = WorkerGroups(v)
	r.COW = cowLevels(v, a, r.Workers)
	add := func(fs ...finding.Finding) { r.Findings = append(r.Findings, fs...) }
	switch {
	case stalled:
		add(stalledFinding(v, r.Progress, r.Blocked, r.Deaths))
	case r.Progress.Idle != nil:
		add(idleFinding(v, r.Progress))
	case r.Progress.Starting != nil:
		add(startingFinding(v, r.Progress.Starting))
	}
	add(deathFindings(v, r.Deaths, r.Blocked)...)
	add(missingRanks(v, r.Deaths)...)
	add(rankPositions(v, stalled)...)
	add(kernelFindings(v, r.Deaths)...)
	if stalled || len(r.Deaths) > 0 {
		if f, ok := blockedTable(v, r.Blocked, finding.Info); ok {
			add(f)
		}
	}
	if f, ok := uninterruptible(v, r.Blocked); ok {
		add(f)
	}
	add(ncclFindings(v, stalled || len(r.Deaths) > 0)...)
	add(cowFindings(v, a, r.Workers)...)
	add(fdFindings(v, a)...)
	add(gilFindings(v, cpus)...)
	add(workerFindings(v, r.Workers)...)
	add(forkFindings(v, r.Progress)...)
	add(pyStackFindings(v)...)
	add(kernelLogNotes(v)...)
	if stalled && stallUnseen(r) {
		r.Unseen, r.UnseenHow = true, unseenHow(v)
		r.Findings[0] = unseenFinding(v, r.Progress, r.Findings[0])
	}
	return r
}

// MeasureProgress says what the job did over the window, for a classifier
// deciding the stalled and idle classes.
func MeasureProgress(tl *timeline.Timeline) Progress {
	v := newView(tl)
	return measureProgress(v, Deaths(v))
}
