package report

import (
	"encoding/json"
	"io"
)

// JSON writes the report as indented JSON (schema: docs/JSON.md). Strings
// are JSON-escaped, so control characters in names are safe here as they are.
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
