package tracejudge

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// Confidence explains a trace verdict's confidence: the product of how
// strongly the shares point to the class (Strength) and how much of the
// trace shows it (Evidence). Text says it in words; the report prints it.
type Confidence struct {
	// Value is the verdict's confidence (0 for an inconclusive verdict).
	Value float64 `json:"value"`
	// Strength in [0, 0.95]: for an idle cause, 0.4 + 0.3 min(1, share /
	// 20 %) + 0.3 min(1, dominance / 60 %), where dominance is the cause's
	// part of all idle causes; for gpu-bound, how far idle is below 10 %.
	Strength float64 `json:"strength"`
	// Evidence in [0, 1]: the smallest of the terms below; 1 when the class
	// rests on enough of the trace.
	Evidence float64 `json:"evidence"`
	// Gaps is the effective number of idle gaps that carry the class's
	// share (Kish: (sum w)^2 / sum w^2 over the gaps' contributions), out of
	// GapsTotal; -1 when the class does not rest on gaps (gpu-bound).
	Gaps      float64 `json:"effective_gaps"`
	GapsTotal int     `json:"gaps"`
	// Steps is the effective number of ProfilerSteps that carry it, out of
	// StepsTotal; -1 when the trace has no steps.
	Steps      float64 `json:"effective_steps"`
	StepsTotal int     `json:"steps"`
	// SpanNs is the GPU activity analysed.
	SpanNs int64 `json:"span_ns"`
	// Text says what the number means, for people.
	Text string `json:"text"`
}

// How much evidence a verdict needs is thresholds.TraceEvidence*.

// candidates, in the order evidence accumulates them.
const (
	evInput = iota
	evSync
	evTransfer
	evSubmission
	numEv
)

func evIndex(c finding.Class) int {
	switch c {
	case finding.Preprocessing:
		return evInput
	case finding.SyncBound:
		return evSync
	case finding.TransferBound:
		return evTransfer
	case finding.SubmissionBound:
		return evSubmission
	}
	return -1
}

// evidence accumulates, per candidate class, how its share is spread over
// gaps and steps.
type evidence struct {
	sum, sq [numEv]float64
	gaps    int
	perStep [][numEv]int64
}

func newEvidence(steps int) *evidence {
	return &evidence{perStep: make([][numEv]int64, steps)}
}

// setSteps sizes the per-step accumulation to the number of steps in scope
// (the gaps seen so far fall in steps below it).
func (e *evidence) setSteps(n int) {
	for len(e.perStep) < n {
		e.perStep = append(e.perStep, [numEv]int64{})
	}
	e.perStep = e.perStep[:n]
}

// gapShares is a gap's contribution to each candidate share, as
// computeShares counts them.
func gapShares(gd *tracestats.GapDetail) [numEv]int64 {
	b := &gd.ByCause
	var w [numEv]int64
	w[evInput] = b[tracestats.CauseDataLoader]
	w[evSync] = b[tracestats.CauseSync]
	w[evTransfer] = b[tracestats.CausePageableCopy]
	w[evSubmission] = b[tracestats.CauseLaunchLatency]
	if gd.AfterSync {
		w[evSync] += b[tracestats.CauseCPUOps] + b[tracestats.CauseLaunchAPI] + b[tracestats.CauseOtherAPI] + b[tracestats.CauseUntraced]
	} else {
		w[evSubmission] += b[tracestats.CauseCPUOps] + b[tracestats.CauseLaunchAPI]
	}
	return w
}

func (e *evidence) addGap(gd *tracestats.GapDetail) {
	e.gaps++
	w := gapShares(gd)
	for c, v := range w {
		f := float64(v)
		e.sum[c] += f
		e.sq[c] += f * f
		if gd.StepPos >= 0 {
			for len(e.perStep) <= gd.StepPos {
				e.perStep = append(e.perStep, [numEv]int64{})
			}
			e.perStep[gd.StepPos][c] += v
		}
	}
}

// kish is the effective number of units behind a total with weights whose
// sum is sum and sum of squares sq: (sum w)^2 / sum w^2 (Kish, Survey
// Sampling, 1965). One unit carrying everything gives 1; n equal units, n.
func kish(sum, sq float64) float64 {
	if sq <= 0 {
		return 0
	}
	return sum * sum / sq
}

// basis computes the evidence terms for a class; class "" (gpu-bound,
// too-little-work) rests on busy time, not on gaps.
func (e *evidence) basis(class finding.Class, spanNs int64) Confidence {
	c := Confidence{Gaps: -1, GapsTotal: e.gaps, Steps: -1, StepsTotal: len(e.perStep), SpanNs: spanNs, Evidence: 1}
	i := evIndex(class)
	if i >= 0 && e.sum[i] > 0 {
		c.Gaps = kish(e.sum[i], e.sq[i])
		c.Evidence = math.Min(c.Evidence, c.Gaps/thresholds.TraceEvidenceFullGaps)
	}
	if n := len(e.perStep); n > 0 {
		if i >= 0 {
			var sum, sq float64
			for _, s := range e.perStep {
				f := float64(s[i])
				sum += f
				sq += f * f
			}
			c.Steps = kish(sum, sq)
		}
		if c.Steps <= 0 {
			c.Steps = float64(n)
		}
		c.Evidence = math.Min(c.Evidence, c.Steps/thresholds.TraceEvidenceFullSteps)
	}
	c.Evidence = math.Min(c.Evidence, timeTerm(spanNs))
	c.Evidence = math.Max(0, math.Min(1, c.Evidence))
	return c
}

// timeTerm is 0 at thresholds.TraceMinSpanNs, 1 at thresholds.TraceEvidenceFullSpanNs, logarithmic between.
func timeTerm(spanNs int64) float64 {
	if spanNs <= thresholds.TraceMinSpanNs {
		return 0
	}
	return math.Min(1, math.Log(float64(spanNs)/float64(thresholds.TraceMinSpanNs))/math.Log(float64(thresholds.TraceEvidenceFullSpanNs)/float64(thresholds.TraceMinSpanNs)))
}

// describe says in words what the evidence behind a class is, and what
// full evidence would be.
func (c Confidence) describe() string {
	var have, full []string
	if c.Gaps >= 0 {
		have = append(have, fmt.Sprintf("%.1f effective gaps of %d", c.Gaps, c.GapsTotal))
		full = append(full, fmt.Sprintf("%.0f gaps", thresholds.TraceEvidenceFullGaps))
	}
	switch {
	case c.Steps >= 0 && c.Gaps >= 0:
		have = append(have, fmt.Sprintf("%.1f effective steps of %d", c.Steps, c.StepsTotal))
		full = append(full, fmt.Sprintf("%.0f steps", thresholds.TraceEvidenceFullSteps))
	case c.Steps >= 0:
		have = append(have, fmt.Sprintf("%d steps", c.StepsTotal))
		full = append(full, fmt.Sprintf("%.0f steps", thresholds.TraceEvidenceFullSteps))
	}
	have = append(have, fmt.Sprintf("%.1f ms of GPU activity", float64(c.SpanNs)/1e6))
	full = append(full, fmt.Sprintf("%.0f ms", float64(thresholds.TraceEvidenceFullSpanNs)/1e6))
	return strings.Join(have, ", ") + " (full evidence: " + strings.Join(full, ", ") + ")"
}

// explain fills Value and Text for a verdict.
func (c *Confidence) explain(v finding.Verdict, strengthWhy string) {
	c.Value = v.Confidence
	if v.Class == finding.Inconclusive {
		c.Text = "0 %: an inconclusive verdict names no class. For a class, confidence is how strongly the shares point to it times how much of the trace shows it"
		if c.Strength > 0 {
			c.Text += fmt.Sprintf(" (here %.2f × %.2f: %s)", c.Strength, c.Evidence, c.describe())
		}
		c.Text += "."
		return
	}
	c.Text = fmt.Sprintf("%.0f %% = how strongly the shares point to %s (%.2f: %s) × how much of the trace shows it (%.2f: %s).",
		100*v.Confidence, v.Class, c.Strength, strengthWhy, c.Evidence, c.describe())
}
