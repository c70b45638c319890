package check

import (
	_ "embed"

	"github.com/gpufeed/gpufeed/internal/finding"
)

//go:embed explain.txt
var explainText string

// Docs explains every check's ID.
func Docs() []finding.Doc {
	return finding.MustParseDocs("internal/check/explain.txt", explainText)
}
