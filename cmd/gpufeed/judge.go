package main

import (
	"fmt"
	"io"

	"github.com/gpufeed/gpufeed/internal/analysis"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/frozen"
	"github.com/gpufeed/gpufeed/internal/report"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// judge turns a timeline into the report: analysis, then the rules, then
// report.Build. diagnose and report both call it, so a recording judged
// later gives exactly the live report.
func judge(tl *timeline.Timeline, notes []string) *report.Report {
	a := analysis.New(tl)
	verdict, findings := applyRules(tl, a)
	// Frozen-job triage and memory/limit findings (issue 7). Until issue 4's
	// classifier owns the stalled class, a stalled job gets its verdict here.
	fr := frozen.Analyze(tl, a)
	findings = append(findings, fr.Findings...)
	if sv := frozen.Verdict(fr); sv != nil && (verdict == nil || verdict.Class == finding.Inconclusive) {
		verdict = sv
	}
	return report.Build(tl, a, verdict, findings, notes)
}

// applyRules runs the verdict rules over the analysis. The rules and the
// classifier are built in issue 4 and wired in here; until then no rule runs
// and the report has no verdict (the text report then starts with the tables).
var applyRules = func(tl *timeline.Timeline, a *analysis.Analysis) (*finding.Verdict, []finding.Finding) {
	return nil, nil
}

// render writes the report in the chosen format.
func render(w io.Writer, r *report.Report, format string) error {
	switch format {
	case "text":
		return report.Text(w, r)
	case "json":
		return report.JSON(w, r)
	}
	return fmt.Errorf("output format %q: want text or json", format)
}

func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("-o %q: want text or json", format)
	}
	return nil
}
