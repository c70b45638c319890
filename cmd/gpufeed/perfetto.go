package main

import (
	"fmt"
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
func checkPerfetto(path string) error {
	if path == "" {
		return nil
	}
	if err := checkWritable(path); err != nil {
		return usagef("--perfetto %s: %v", path, err)
	}
	return nil
}

// writePerfetto writes the file with write and says what it holds on stderr.
func writePerfetto(path string, write func(f *os.File) (render.PerfettoStats, error)) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--perfetto %s: %v", path, err)
	}
	st, err := write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--perfetto %s: %v", path, err)
	}
	var size int64
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	warn("wrote the timeline to %s (Perfetto: %d tracks, %d counter values, %d slices, %d instants, %s); open it in ui.perfetto.dev",
		path, st.Tracks, st.Counters, st.Slices, st.Instants, humanBytes(size))
	return nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// perfettoReport writes a live report's timeline.
func perfettoReport(path string, rep *render.Report) error {
	return writePerfetto(path, func(f *os.File) (render.PerfettoStats, error) { return render.Perfetto(f, rep) })
}
