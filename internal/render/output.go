package render

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// The one output layer. Every command builds its report model (a *Report
// for diagnose and report, a *CheckReport for check, a *TraceReport for
// trace) and hands it to Write with a Format; a Format is one Renderer,
// which knows how to write each model. Adding a format (Perfetto, HTML) is
// adding one Renderer to formats, not touching three commands.
//
// What every renderer shares lives here and in textout.go and jsonout.go:
// the Header every JSON document carries, the sanitising of text from
// outside (internal/safetext, applied at the writer so no renderer can
// forget it), numbers, bytes and durations in human units, evidence lines
// and wrapping to the terminal.

// Format names an output format (-o).
type Format string

// The formats gpufeed writes.
const (
	FormatText Format = "text"
	FormatJSON Format = "json"
	// FormatPerfetto is the timeline as a Perfetto trace: binary, so it
	// is written to a file (--perfetto FILE), not chosen with -o.
	FormatPerfetto Format = "perfetto"
)

// Renderer writes every report model in one format.
type Renderer interface {
	Diagnose(w io.Writer, r *Report, o Options) error
	Check(w io.Writer, r *CheckReport, o Options) error
	Trace(w io.Writer, r *TraceReport, o Options) error
}

var formats = map[Format]Renderer{
	FormatText:     textRenderer{},
	FormatJSON:     jsonRenderer{},
	FormatPerfetto: perfettoRenderer{},
	FormatHTML:     htmlRenderer{},
	FormatJSONL:    jsonlRenderer{},
}

// formatOrder is the order formats are listed in.
var formatOrder = []Format{FormatText, FormatJSON, FormatHTML, FormatJSONL}

// Formats lists the format names.
func Formats() []string {
	var out []string
	for _, f := range formatOrder {
		out = append(out, string(f))
	}
	return out
}

// FormatList names the formats for a message: "text, json or html".
func FormatList() string {
	f := Formats()
	if len(f) < 2 {
		return strings.Join(f, "")
	}
	return strings.Join(f[:len(f)-1], ", ") + " or " + f[len(f)-1]
}

// ParseFormat reads an -o value; case does not matter ("JSON" is json).
func ParseFormat(s string) (Format, error) {
	f := Format(strings.ToLower(strings.TrimSpace(s)))
	if f == FormatPerfetto {
		return "", fmt.Errorf("-o %q: the Perfetto timeline is a binary file: write it with --perfetto FILE", s)
	}
	if _, ok := formats[f]; !ok {
		return "", fmt.Errorf("-o %q: want %s", s, FormatList())
	}
	return f, nil
}

// Options are what the reader asked to see.
type Options struct {
	// Verbose adds every finding's evidence and the tables (-v).
	Verbose bool
	// Quiet keeps only failures (check --quiet).
	Quiet bool
	// Width is the terminal width text wraps to (0: DefaultWidth).
	Width int
	// Rank selects one rank's detail in a multi-rank trace (nil: all ranks
	// in the summary; the detail of each with Verbose).
	Rank *int
}

// Text widths: DefaultWidth when the output is not a terminal, never more
// than MaxWidth (long lines are hard to read even on a wide screen).
const (
	DefaultWidth = 100
	MaxWidth     = 120
	minWidth     = 40
)

func (o Options) width() int {
	switch {
	case o.Width <= 0:
		return DefaultWidth
	case o.Width > MaxWidth:
		return MaxWidth
	case o.Width < minWidth:
		return minWidth
	}
	return o.Width
}

// Document is a report model Write can render.
type Document interface{ document() }

func (*Report) document()      {}
func (*CheckReport) document() {}
func (*TraceReport) document() {}

// Write renders doc in format f.
func Write(w io.Writer, f Format, doc Document, o Options) error {
	r, ok := formats[f]
	if !ok {
		return fmt.Errorf("output format %q: want %s", f, FormatList())
	}
	switch d := doc.(type) {
	case *Report:
		return r.Diagnose(w, d, o)
	case *CheckReport:
		return r.Check(w, d, o)
	case *TraceReport:
		return r.Trace(w, d, o)
	case *CompareReport:
		cr, ok := r.(compareRenderer)
		if !ok {
			return fmt.Errorf("output format %q: gpufeed compare writes text or json", f)
		}
		return cr.Compare(w, d, o)
	case *DrillReport:
		return writeDrill(w, f, r, d, o)
	}
	return fmt.Errorf("render: no renderer for %T", doc)
}

// SchemaVersion is the version of every JSON document gpufeed writes
// (docs/JSON.md, docs/gpufeed.schema.json). Bump it on any incompatible
// change.
const SchemaVersion = 2

// Header is what every JSON document starts with: which schema, which
// command and tool wrote it, about which host, when.
type Header struct {
	SchemaVersion int    `json:"schema_version"`
	Command       string `json:"command"`
	Tool          string `json:"tool"`
	ToolVersion   string `json:"tool_version"`
	// Hostname is the host the document describes: the observed host for
	// diagnose and report (as recorded), the checked host for check, the
	// host that read the trace for trace; null when it cannot be read.
	Hostname *string `json:"hostname"`
	// GeneratedAt is when the document was written, RFC 3339 UTC.
	GeneratedAt string `json:"generated_at"`
}

// NewHeader fills a header for command, written now by gpufeed version.
// hostname "" is null.
func NewHeader(command, version, hostname string) Header {
	h := Header{SchemaVersion: SchemaVersion, Command: command, Tool: "gpufeed", ToolVersion: version,
		GeneratedAt: Now().UTC().Format(time.RFC3339)}
	if hostname != "" {
		h.Hostname = &hostname
	}
	return h
}

// Now is the time a document is written: the clock, or SOURCE_DATE_EPOCH
// (seconds since the epoch) when it is set, so that a build or a test can
// make outputs reproducible (reproducible-builds.org's convention).
func Now() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Now()
}
