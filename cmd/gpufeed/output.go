package main

import (
	"fmt"
	"io"

	"github.com/gpufeed/gpufeed/internal/render"
)

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
