package main

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/gpufeed/gpufeed/internal/render"
)

// addPerfettoFlag adds --perfetto FILE: the timeline as a Perfetto trace,
// besides the report.
func addPerfettoFlag(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "perfetto", "", "also write the timeline to `FILE` as a Perfetto trace (open it in ui.perfetto.dev)")
}

// checkPerfetto fails early when FILE cannot be written.
func checkPerfetto(path string) error { return checkOutputFile("--perfetto", path) }

// writePerfetto writes doc's timeline to path and says so on stderr.
func writePerfetto(path string, doc render.Document) error {
	if path == "" {
		return nil
	}
	if err := writeDocFile("--perfetto", path, render.FormatPerfetto, doc); err != nil {
		return err
	}
	var size int64
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	warn("wrote the timeline to %s (Perfetto, %s); open it in ui.perfetto.dev", path, render.Bytes(float64(size)))
	return nil
}

// perfettoReport writes a live report's timeline.
func perfettoReport(path string, rep *render.Report) error { return writePerfetto(path, rep) }
