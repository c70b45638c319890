package tracejudge

import (
	_ "embed"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

//go:embed explain.txt
var explainText string

// StragglerID is the finding rank comparison emits.
const StragglerID = "straggler-rank"

// Docs explains the finding IDs only the trace judgement emits; those that
// carry a live cause's ID (CauseID) are explained with the live rules.
func Docs() []finding.Doc {
	return finding.MustExpandDocs("internal/judge/tracejudge/explain.txt", explainText, thresholds.Text())
}

// IDs lists every finding ID the trace judgement can emit: one per rule,
// and rank comparison's.
func IDs() []string {
	var out []string
	for _, r := range registry {
		out = append(out, r.ID)
	}
	return append(out, StragglerID)
}
