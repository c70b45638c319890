package main

import (
	"fmt"
	"io"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// judgeTimeline turns a timeline into the report: analysis, then the rules, then
// render.Build. diagnose and report both call it, so a recording judged
// later gives exactly the live report.
func judgeTimeline(tl *timeline.Timeline, notes []string) *render.Report {
	a := derive.New(tl)
	verdict, findings := applyRules(tl, a)
	return render.Build(tl, a, verdict, findings, notes)
}

// applyRules runs the verdict rules (frozen-job triage among them) and the
// classifier (internal/judge).
// It is a variable so tests can judge with a fixed verdict.
var applyRules = judge.Judge

// writeReport writes the report in the chosen format.
func writeReport(w io.Writer, r *render.Report, format string) error {
	switch format {
	case "text":
		return render.Text(w, r)
	case "json":
		return render.JSON(w, r)
	}
	return fmt.Errorf("output format %q: want text or json", format)
}

func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("-o %q: want text or json", format)
	}
	return nil
}
