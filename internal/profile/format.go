package profile

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// FormatDump writes processes in `py-spy dump`'s text format, which
// ParsePySpy reads back: a timeline keeps one text format for stacks,
// whichever reader took them. Two lines py-spy does not print say which
// reader it was ("Read by ...") and how many threads were left out.
// Names are written as read; the renderers escape them.
func FormatDump(w io.Writer, procs []Process) error {
	var sb strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&sb, "Process %d: %s\n", p.PID, oneLine(p.Cmdline))
		fmt.Fprintf(&sb, "Python v%s (%s)\n", oneLine(p.Python), oneLine(p.Exe))
		if p.Reader != "" {
			sb.WriteString("Read by " + oneLine(p.Reader) + "\n")
		}
		if p.Skipped > 0 {
			sb.WriteString("Skipped " + strconv.Itoa(p.Skipped) + " threads (their stacks changed while read)\n")
		}
		sb.WriteString("\n")
		for _, t := range p.Threads {
			id := t.ID
			if id == "" {
				id = strconv.Itoa(t.TID)
			}
			fmt.Fprintf(&sb, "Thread %s (%s)", oneLine(id), oneLine(t.Status))
			if t.Name != "" {
				sb.WriteString(": \"" + oneLine(t.Name) + "\"")
			}
			sb.WriteString("\n")
			for _, f := range t.Frames {
				// names are trimmed: a frame line that starts with more
				// spaces reads as a --locals line
				fn := strings.TrimSpace(oneLine(f.Function))
				if fn == "" {
					fn = "?"
				}
				loc := strings.TrimSpace(oneLine(f.File))
				if f.Line > 0 {
					loc += ":" + strconv.Itoa(f.Line)
				}
				sb.WriteString("    " + fn + " (" + loc + ")\n")
			}
		}
		sb.WriteString("\n")
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// oneLine keeps a field on its line: line breaks would start a new record.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}
