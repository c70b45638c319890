package diagnose

import (
	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/render"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Judge turns a timeline into the report: its derived view, then the rules
// and the classifier (frozen-job judgement among them) give one
// judge.Judgement, which the report model carries as it is. diagnose, demo
// and report all call it, so a recording judged later gives exactly the
// live report. notes are added to the report's.
func Judge(tl *timeline.Timeline, notes []string) *render.Report {
	v := derive.New(tl)
	return render.Build(tl, v, judge.Judge(tl, v), notes)
}
