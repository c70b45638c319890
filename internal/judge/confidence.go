package judge

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// Confidence is a function of the evidence, not of the window's length: a
// longer window holds more intervals, but they are consecutive readings of
// the same job, so the bound below counts at most ConfidenceMaxIntervals of
// them (the share that carries the cause, as read over all of them): the
// same job gets the same bound over 3 s and over 10 s. docs/RULES.md holds
// the measured calibration: stated confidence against how often the verdict
// was right.

// wilsonLower is the least share of the intervals that carry a cause at
// one-sided 95 % (Wilson score interval, z = ConfidenceZ), from k of n
// carrying it: a small sample is not taken at its face value (3 of 3 is
// not 100 %). n counts at most ConfidenceMaxIntervals, k scaled with it.
func wilsonLower(k float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	z := thresholds.ConfidenceZ
	p := math.Min(math.Max(k, 0), float64(n)) / float64(n)
	nf := float64(min(n, thresholds.ConfidenceMaxIntervals))
	den := 1 + z*z/nf
	c := p + z*z/(2*nf)
	r := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return math.Max(0, (c-r)/den)
}

// withEvidence multiplies a verdict's confidence by the least share of its
// intervals that carry it (k of n, wilsonLower), and says so in the basis.
func withEvidence(v *finding.Verdict, k float64, n int, what string) {
	f := wilsonLower(k, n)
	base := v.Confidence
	v.Confidence = round2(math.Max(0, math.Min(1, base*f)))
	counted := ""
	if n > thresholds.ConfidenceMaxIntervals {
		counted = fmt.Sprintf("; weighed as %d, since consecutive intervals of one job are not independent readings", thresholds.ConfidenceMaxIntervals)
	}
	v.Basis = fmt.Sprintf("%.0f%% = %.0f%% (%s) × %.0f%% for how many intervals carry it (%s of %d %s%s; at least %.0f%% of such intervals would, at 95%%)",
		v.Confidence*100, base*100, v.Basis, f*100, strconv.FormatFloat(math.Round(k*10)/10, 'f', -1, 64), n, what, counted, f*100)
}

// intervalsIn is how many of the window's intervals a span holds.
func intervalsIn(in *Input, span time.Duration) int {
	iv := time.Duration(in.Timeline.Meta.Interval)
	if iv <= 0 {
		return len(in.View.Intervals)
	}
	return max(1, int(math.Round(float64(span)/float64(iv))))
}

// runnerUp is the cause with the largest share after top (spin-or-submit
// time included: it competes with it too). Unexplained time is no cause
// that competes: it is evidence missing, counted apart (explainedShare).
func (at Attribution) runnerUp(top finding.Class) (finding.Class, float64) {
	var best finding.Class = Unexplained
	bestShare := 0.0
	keys := make([]finding.Class, 0, len(at.Share))
	for c := range at.Share {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	for _, c := range keys {
		if c != top && c != Unexplained && at.Share[c] > bestShare {
			best, bestShare = c, at.Share[c]
		}
	}
	return best, bestShare
}

func causeName(c finding.Class) string {
	if c == Unexplained {
		return "unexplained"
	}
	return string(c)
}

// independentSources are the findings that read the launch thread with a
// probe of their own, beside /proc's states: its CPU profile, its CUDA
// driver calls, its syscalls.
var independentSources = []string{"launch-thread-cpu-split", "launch-thread-driver-calls", "main-thread-polls-dataloader"}

// agreement halves a verdict's confidence when an independent source names
// another class, and names the sources that agree in its basis.
func agreement(v *finding.Verdict, fs []finding.Finding) {
	var agree, disagree []string
	for _, f := range fs {
		if f.Supports == "" || !slices.Contains(independentSources, f.ID) {
			continue
		}
		if f.Supports == v.Class {
			agree = append(agree, f.ID)
		} else {
			disagree = append(disagree, f.ID+" names "+string(f.Supports))
		}
	}
	switch {
	case len(disagree) > 0:
		v.Confidence = round2(v.Confidence / 2)
		v.Basis = fmt.Sprintf("%.0f%% = %s, halved because an independent source names another class (%s)", v.Confidence*100, v.Basis, strings.Join(disagree, "; "))
	case len(agree) > 0:
		v.Basis += "; independent sources agree: " + strings.Join(agree, ", ")
	}
}

// busyThreadUnseparated says whether a submission-bound verdict rests on
// the launch thread's running time (most of its share passed while it ran,
// not while it waited for a CPU) with no probe that saw what it ran: from
// /proc a thread launching work, one preparing its own input and one
// spinning in a synchronisation read the same.
func busyThreadUnseparated(in *Input, fs []finding.Finding, share float64) bool {
	for _, f := range fs {
		if f.Supports == finding.SubmissionBound && (f.ID == "launch-thread-cpu-split" || f.ID == "launch-thread-driver-calls") {
			return false
		}
	}
	running := share - in.Attribution.Descheduled
	return running*2 > share
}

// indistinct says, in a submission-bound verdict that rests on a busy
// launch thread no probe separated, which classes cannot be told apart and
// the cheapest way to tell them, and caps its confidence at
// IndistinctMaxConfidence: one of three readings of the same /proc picture.
func indistinct(v *finding.Verdict, in *Input) {
	if v.Confidence > thresholds.IndistinctMaxConfidence {
		v.Basis = fmt.Sprintf("%.0f%%, capped from %s: the thread's running time carries this verdict, and a thread launching work, one preparing its own input and one spinning in a synchronisation read the same from /proc",
			thresholds.IndistinctMaxConfidence*100, v.Basis)
		v.Confidence = thresholds.IndistinctMaxConfidence
	}
	// First, so that a first screen that shortens the summary keeps it.
	v.Summary = "from /proc alone gpufeed cannot tell submission-bound from preprocessing-bound (its own input work) or sync-bound (a spinning sync): " + v.Summary
	v.Missing = tellApart(in)
	v.Decision = "Tell them apart first (below); then launching: fused kernels or a CUDA graph; its own input work: DataLoader workers (num_workers > 0); a spin: no .item() every step."
}

// tellApart is the cheapest way to tell a busy launch thread's work apart,
// given what this run could not take.
func tellApart(in *Input) string {
	pid := in.Job.Launch.T.PID
	prof := in.Timeline.Meta.CPUProfile
	var how string
	switch {
	case prof == nil || prof.State == profile.StateOff:
		how = fmt.Sprintf("gpufeed diagnose --pid %d --profile auto as root or with CAP_PERFMON: its CPU profile splits the thread's CPU into launches, syncs and its own work", pid)
	case prof.State == profile.StateUnavailable:
		how = fmt.Sprintf("the CPU profile, which this run could not take: gpufeed diagnose --pid %d as root or with CAP_PERFMON splits the thread's CPU into launches, syncs and its own work", pid)
	default:
		how = fmt.Sprintf("a longer window (gpufeed diagnose --pid %d --duration 10): the CPU profile held too few of the thread's samples to split them", pid)
	}
	return how + "; or --py-stacks (no privilege over your own job) shows the Python line it runs: DataLoader's __next__, a .item(), the model"
}
