package frozen

import (
	_ "embed"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

//go:embed explain.txt
var explainText string

// Docs explains every finding ID frozen-job triage emits.
func Docs() []finding.Doc {
	return finding.MustExpandDocs("internal/judge/frozen/explain.txt", explainText, thresholds.Text())
}

// IDs lists the finding IDs frozen-job triage emits: the ones it explains
// (a test holds them to the IDs its code writes).
func IDs() []string {
	var out []string
	for _, d := range Docs() {
		out = append(out, d.ID)
	}
	return out
}
