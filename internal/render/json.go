package render

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// JSON writes the report as indented JSON (schema: docs/JSON.md). Strings
// are JSON-escaped, so control characters in names are safe here as they
// are; bidirectional controls are escaped too (safetext.EscapeJSON), which
// leaves every value as it was.
func JSON(w io.Writer, r *Report) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return err
	}
	_, err := w.Write(safetext.EscapeJSON(buf.Bytes()))
	return err
}
