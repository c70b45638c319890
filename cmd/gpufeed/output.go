package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/render"
)

// outputFlags are the flags every command that writes a report shares:
// the format and how much of the report to show.
type outputFlags struct {
	format  string
	verbose bool
}

// The formats each kind of command writes: a live run also streams its
// intervals (jsonl); a recording, a check and a trace are one document
// (text, json, html); a comparison and a drill's tables are text or json.
var (
	liveFormats     = []render.Format{render.FormatText, render.FormatJSON, render.FormatHTML, render.FormatJSONL}
	documentFormats = []render.Format{render.FormatText, render.FormatJSON, render.FormatHTML}
	tableFormats    = []render.Format{render.FormatText, render.FormatJSON}
)

func (o *outputFlags) add(cmd *cobra.Command, formats []render.Format) {
	f := cmd.Flags()
	addOutputFlag(f, &o.format, formats)
	f.BoolVarP(&o.verbose, "verbose", "v", false, "show every finding's evidence and the tables (text)")
}

// parse checks the format before any work is done.
func (o *outputFlags) parse() (render.Format, error) { return render.ParseFormat(o.format) }

func (o *outputFlags) options(w io.Writer) render.Options {
	return render.Options{Verbose: o.verbose, Width: terminalWidth(w)}
}

// terminalWidth is the width text wraps to: $COLUMNS when set, else the
// terminal's when w is one, else render.DefaultWidth (render caps it).
func terminalWidth(w io.Writer) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	return render.DefaultWidth
}

// writeReport writes a diagnose or report document.
func writeReport(cmd *cobra.Command, command string, r *render.Report, o outputFlags) error {
	format, err := o.parse()
	if err != nil {
		return err
	}
	r.Header = render.NewHeader(command, version, r.Machine.Hostname)
	w := cmd.OutOrStdout()
	return render.Write(w, format, r, o.options(w))
}

// hostname is this host's name, "" when it cannot be read.
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// checkOutputFile fails early, as a usage error naming the flag, when the
// file a flag names (--record, --perfetto, --json) cannot be written; an
// empty path is no file.
func checkOutputFile(flag, path string) error {
	if path == "" {
		return nil
	}
	if err := checkWritable(path); err != nil {
		return usagef("%s %s: %v", flag, path, err)
	}
	return nil
}

// writeDocFile writes doc to path in format, for a flag that names a file
// beside the command's own output (--perfetto, --json); its errors name
// the flag and the file.
func writeDocFile(flag, path string, format render.Format, doc render.Document) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s %s: %v", flag, path, err)
	}
	err = render.Write(f, format, doc, render.Options{})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s %s: %v", flag, path, err)
	}
	return nil
}
