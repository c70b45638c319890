package render

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// ExplainHint is the last line of every text report: where to read what a
// finding means.
const ExplainHint = "gpufeed explain ID says what a finding means, how it is measured and what to change."

// explainWidth is the width explain wraps its text to, listWidth the list's.
const (
	explainWidth = 100
	listWidth    = 120
)

// Explain writes one finding's documentation, as `gpufeed explain ID`
// prints it: the ID and its summary, then what it means, how it is
// measured, its thresholds, what to change and the public sources.
func Explain(w io.Writer, d finding.Doc) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", d.ID, d.Summary)
	if len(d.From) > 0 {
		fmt.Fprintf(&b, "reported by: gpufeed %s\n", strings.Join(d.From, ", gpufeed "))
	}
	for _, s := range []struct{ title, text string }{
		{"WHAT IT MEANS", d.Means},
		{"HOW IT IS MEASURED", d.Measured},
		{"THRESHOLDS", d.Thresholds},
		{"WHAT TO CHANGE", d.Change},
	} {
		fmt.Fprintf(&b, "\n%s\n", s.title)
		for _, l := range wrapText(s.text, explainWidth-2) {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	fmt.Fprintf(&b, "\nSOURCES\n")
	for _, s := range d.Sources {
		for i, l := range wrapText(s, explainWidth-4) {
			if i == 0 {
				fmt.Fprintf(&b, "  - %s\n", l)
			} else {
				fmt.Fprintf(&b, "    %s\n", l)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ExplainList writes every documented ID with its one-line summary, grouped
// by what reports it.
func ExplainList(w io.Writer, docs []finding.Doc) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Every finding gpufeed reports, by the command that reports it; gpufeed explain ID says more.\n")
	idWidth := 0
	for _, d := range docs {
		idWidth = max(idWidth, len(d.ID))
	}
	for _, g := range []struct{ from, title string }{
		{"diagnose", "LIVE (gpufeed diagnose, report, demo)"},
		{"trace", "PROFILER TRACES (gpufeed trace)"},
		{"check", "PLATFORM CHECKS (gpufeed check, and diagnose for their warnings and failures)"},
	} {
		fmt.Fprintf(&b, "\n%s\n", g.title)
		for _, d := range docs {
			if !slices.Contains(d.From, g.from) || g.from == "diagnose" && slices.Contains(d.From, "check") {
				continue
			}
			for i, l := range wrapText(d.Summary, listWidth-idWidth-4) {
				id := d.ID
				if i > 0 {
					id = ""
				}
				fmt.Fprintf(&b, "  %-*s  %s\n", idWidth, id, l)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrapText breaks s into lines of at most width runes at spaces (a longer
// word, a URL, stays whole on its own line).
func wrapText(s string, width int) []string { return safetext.Wrap(s, width, "", "", 0) }
