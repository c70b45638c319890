// Package judge judges a timeline: rules are pure functions from a timeline
// and its derived view (through the shared Input) to findings, one rule per
// file, their thresholds named constants in internal/judge/thresholds; the
// classifier (Classify) then picks one verdict: a bottleneck class, a
// confidence, the findings that carry it and the change to make first, or
// "inconclusive" with what would make it conclusive. Judge returns all of
// it as one Judgement (with the job as judged, the kernel log lines
// recognised once, the deaths and the series), which every reader takes
// as it is.
//
// A live run and its recording give the same verdict: nothing here reads
// anything but the timeline (the platform checks' results travel in it).
//
// Adding a rule: a new file with a Rule value registered from its init
// function, its sources in a comment beside it, and an entry in
// explain.txt for every ID it emits (Rule.Emits; `gpufeed explain ID`
// prints it). A rule that supports a class sets Finding.Supports; the
// class's cause finding (CauseID) states the verdict. Frozen-job triage
// (internal/judge/frozen) runs as one rule and decides the stalled class.
// The judgement of profiler traces is internal/judge/tracejudge, with the
// same classes and thresholds.
package judge

import (
	_ "embed"
	"sort"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/frozen"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Rule is one judgement.
type Rule struct {
	// ID is the rule's name; its findings carry IDs it documents (usually the same).
	ID string
	// Title says in a few words what it looks at.
	Title string
	// Run returns the rule's findings (none when it has nothing to say).
	Run func(in *Input) []finding.Finding
	// Emits lists the finding IDs the rule's findings carry; nil means
	// just ID. Every one is explained (Docs).
	Emits []string
	// EmitsChecks: the rule's findings are gpufeed check's outcomes,
	// carrying the checks' IDs.
	EmitsChecks bool
}

// IDs returns the finding IDs a rule's findings carry (none for the
// platform checks' rule: those are the checks').
func (r Rule) IDs() []string {
	switch {
	case r.EmitsChecks:
		return nil
	case r.Emits != nil:
		return r.Emits
	}
	return []string{r.ID}
}

//go:embed explain.txt
var explainText string

// Docs explains every finding ID the live rules emit (frozen-job triage's
// too), and those trace findings whose cause is a live one's.
func Docs() []finding.Doc {
	return append(finding.MustExpandDocs("internal/judge/explain.txt", explainText, thresholds.Text()), frozen.Docs()...)
}

var registry []Rule

// register adds a rule; each rule file calls it from init.
func register(r Rule) { registry = append(registry, r) }

// Rules lists every rule, by ID.
func Rules() []Rule {
	out := append([]Rule(nil), registry...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Judge runs every rule over a timeline and classifies: the Judgement
// (the verdict, all findings with the verdict's own first, the job as
// judged, the kernel lines recognised, the deaths, the series).
func Judge(tl *timeline.Timeline, a *derive.View) *Judgement {
	return JudgeInput(NewInput(tl, a))
}

// JudgeInput is Judge over an input already built.
func JudgeInput(in *Input) *Judgement {
	var fs []finding.Finding
	for _, r := range Rules() {
		fs = append(fs, r.Run(in)...)
	}
	applyCPUSplit(in, fs)
	v := Classify(in, fs)
	fs = settle(v, fs)
	stragglerVerdict(in, &v, fs)
	finding.VerdictFirst(&v, fs)
	return judgement(in, &v, fs)
}

// settle makes the findings agree with the verdict: when the job is stalled
// or idle, or the window holds only its start-up, other classes' cause findings describe its symptoms (an idle GPU,
// a sleeping thread) as if the job were running, so they are dropped; when
// the GPU is busy (GPU-bound), a minor cause of its little idle time is
// information, not a warning.
func settle(v finding.Verdict, fs []finding.Finding) []finding.Finding {
	causeOf := map[string]finding.Class{}
	for c, id := range CauseID {
		causeOf[id] = c
	}
	out := fs[:0]
	for _, f := range fs {
		if c, ok := causeOf[f.ID]; ok && c != v.Class {
			switch {
			case v.Class == finding.Stalled, v.Class == finding.Idle, containsID(v.Because, "job-starting"):
				continue
			case v.Class == finding.GPUBound:
				f.Severity = finding.Info
			}
		}
		out = append(out, f)
	}
	return out
}
