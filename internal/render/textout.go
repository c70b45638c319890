package render

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// What every text renderer shares: a writer that sanitises what reaches
// the terminal, numbers, bytes and durations in human units, one way to
// write a piece of evidence, and wrapping to the terminal width.

// textOut collects a text report and writes it cleaned, in two places so
// that no renderer can forget: every string argument of line and printf
// (and of rowf, for tables) goes through safetext.Clean, so a name cannot
// break the line it is on ("\n", U+2028, U+2029) nor reorder it
// (bidirectional controls); and every line goes through
// safetext.CleanLine on its way out, so nothing composed elsewhere can move
// the cursor or recolour the screen either. Renderers cap long names
// where a table needs it; they need not clean.
type textOut struct {
	buf bytes.Buffer
	// wrapAt, when set, wraps every line longer than it on its way out
	// (wrapLine): the verbose reports, whose lines of evidence and tables
	// would otherwise run past the terminal.
	wrapAt int
}

func (t *textOut) printf(format string, args ...any) { fmt.Fprintf(&t.buf, format, cleanArgs(args)...) }

func (t *textOut) line(format string, args ...any) {
	fmt.Fprintf(&t.buf, format, cleanArgs(args)...)
	t.buf.WriteByte('\n')
}

// rowf writes a table row (to a tabwriter), its string arguments cleaned.
func rowf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, cleanArgs(args)...) }

// cleanArgs cleans the strings among args (safetext.Clean).
func cleanArgs(args []any) []any {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = safetext.Clean(v)
		case fmt.Stringer:
			args[i] = safetext.Clean(v.String())
		}
	}
	return args
}

// flush writes what was collected, line by line, cleaned.
func (t *textOut) flush(w io.Writer) error {
	var out bytes.Buffer
	out.Grow(t.buf.Len())
	for b := t.buf.Bytes(); len(b) > 0; {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out.WriteString(safetext.CleanLine(string(b)))
			break
		}
		for _, l := range wrapLine(safetext.CleanLine(string(b[:i])), t.wrapAt) {
			out.WriteString(l)
			out.WriteByte('\n')
		}
		b = b[i+1:]
	}
	_, err := w.Write(out.Bytes())
	return err
}

// moreHint is the last line of a short text report: how to see more, and
// where to read what a finding means (ExplainHint, shortened to fit).
const moreHint = "-v: evidence and tables; gpufeed explain ID: what a finding means" // fits 80 columns

// Number writes a value with the precision a reader needs: whole numbers
// as they are, others to about three significant digits, trailing zeros
// dropped.
func Number(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	a := math.Abs(v)
	var s string
	switch {
	case v == math.Trunc(v) || a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.01 || a == 0:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(v, 'g', 2, 64)
	}
	if strings.Contains(s, ".") && !strings.ContainsAny(s, "eE") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// Bytes writes a byte count in binary units: "512 B", "11.6 KiB",
// "19.39 GiB". A value that rounds to 0 B prints as 0 B, never "-0 B".
func Bytes(v float64) string { return safetext.Bytes(v, 1, 2) }

// Duration writes a time in the unit that suits it, to about three
// significant digits: "850 ns", "98 µs", "6.45 ms", "10.0 s", "17 min".
func Duration(d time.Duration) string {
	return durationNS(float64(d))
}

func durationNS(ns float64) string {
	neg := ns < 0
	if neg {
		ns = -ns
	}
	var s string
	switch {
	case ns < 1e3:
		s = Number(math.Round(ns)) + " ns"
	case ns < 1e6:
		s = Number(sig3(ns/1e3)) + " µs"
	case ns < 1e9:
		s = Number(sig3(ns/1e6)) + " ms"
	case ns < 60e9:
		s = strconv.FormatFloat(ns/1e9, 'f', 1, 64) + " s"
	case ns < 3600e9:
		s = strconv.FormatFloat(ns/60e9, 'f', 0, 64) + " min"
	default:
		s = strconv.FormatFloat(ns/3600e9, 'f', 1, 64) + " h"
	}
	if neg {
		return "-" + s
	}
	return s
}

// sig3 rounds to three significant digits.
func sig3(v float64) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// unitScale gives the nanoseconds or bytes in one of a unit evidence uses.
var (
	timeUnits  = map[string]float64{"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
	bytesUnits = map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
)

// Quantity writes a value with its unit as a reader expects it: times and
// byte counts in human units (90938 us is "90.9 ms", 11834 B "11.6 KiB"),
// byte rates likewise, percentages glued to the number ("42%", "42% of
// wall time"), anything else as a number and its unit.
func Quantity(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "not measured"
	}
	switch {
	case unit == "":
		return Number(v)
	case strings.HasPrefix(unit, "%"):
		return Number(v) + unit
	case timeUnits[unit] != 0:
		return durationNS(v * timeUnits[unit])
	case bytesUnits[unit] != 0:
		return Bytes(v * bytesUnits[unit])
	case strings.HasSuffix(unit, "/s") && bytesUnits[strings.TrimSuffix(unit, "/s")] != 0:
		return Bytes(v*bytesUnits[strings.TrimSuffix(unit, "/s")]) + "/s"
	case strings.HasPrefix(unit, "/"):
		return Number(v) + unit
	}
	return Number(v) + " " + unit
}

// evidenceValue is what a piece of evidence says: its text, or its value
// in its unit.
func evidenceValue(e finding.Evidence) string {
	if e.Text != "" {
		return e.Text
	}
	return Quantity(e.Value, e.Unit)
}

// evidenceLine writes one piece of evidence: "what: value", then where it
// comes from: its window (unless it is the report's, said once in its
// header: sharedWindow) and its source.
func evidenceLine(e finding.Evidence, sharedWindow string, withSource bool) string {
	s := e.What + ": " + evidenceValue(e)
	if !withSource {
		return s
	}
	var ctx []string
	if e.Window != "" && e.Window != sharedWindow {
		ctx = append(ctx, e.Window)
	}
	if e.Source != "" {
		ctx = append(ctx, e.Source)
	}
	if len(ctx) > 0 {
		s += " (" + strings.Join(ctx, "; ") + ")"
	}
	return s
}

// numberLines is a piece of evidence in at most width columns, wrapped
// with a hanging indent when it is longer: nothing of its description or
// its number is cut.
func numberLines(prefix string, e finding.Evidence, width int) []string {
	what, val := safetext.Clean(e.What), safetext.Clean(evidenceValue(e))
	return wrapWhole(what+": "+val, width, prefix, strings.Repeat(" ", utf8.RuneCountInString(prefix)+2))
}

// wrapLine wraps one output line longer than width (0: never) at spaces,
// continuing under its own indentation plus four columns; nothing is cut.
func wrapLine(l string, width int) []string {
	if width <= 0 || utf8.RuneCountInString(l) <= width {
		return []string{l}
	}
	lead := len(l) - len(strings.TrimLeft(l, " "))
	indent := strings.Repeat(" ", min(lead+4, width/2))
	// Break at the last space that fits, keeping the spacing within the
	// line (a table row stays aligned up to its break).
	var out []string
	r := []rune(l)
	for minCut := lead; len(r) > width; minCut = len(indent) {
		cut := -1
		for i := width; i > minCut; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		if cut < 0 {
			cut = width
		}
		out = append(out, strings.TrimRight(string(r[:cut]), " "))
		rest := strings.TrimLeft(string(r[cut:]), " ")
		r = []rune(indent + rest)
	}
	return append(out, string(r))
}

// wrapWhole breaks s into lines of at most width columns at spaces, the
// first starting with first, the others with rest, and never cuts: a word
// longer than a line is split across lines. What the reader must read
// whole (a verdict, a decision, what would conclude, evidence) goes
// through it; only listings are clipped.
func wrapWhole(s string, width int, first, rest string) []string {
	words := strings.Fields(safetext.Clean(s))
	var lines []string
	cur, empty := first, true
	for _, w := range words {
		if !empty && utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) > width {
			lines = append(lines, cur)
			cur, empty = rest, true
		}
		if !empty {
			cur += " "
		}
		empty = false
		// A word that does not fit a line on its own is split.
		for room := width - utf8.RuneCountInString(cur); utf8.RuneCountInString(w) > room && room > 0; room = width - utf8.RuneCountInString(cur) {
			r := []rune(w)
			lines = append(lines, cur+string(r[:room]))
			cur, w = rest, string(r[room:])
		}
		cur += w
	}
	if !empty || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}

// wrap breaks s into lines of at most width columns at spaces: the first
// line starts with first, the others with rest. At most maxLines lines
// (0: any number); the last kept one ends with "…" when text was left out.
// A word longer than a line is clipped; no words is one line holding first.
func wrap(s string, width int, first, rest string, maxLines int) []string {
	lines := safetext.Wrap(safetext.Clean(s), width, first, rest, maxLines)
	if len(lines) == 0 {
		return []string{first}
	}
	for i := range lines {
		lines[i] = clip(lines[i], width)
	}
	return lines
}

// clip cuts s to at most n columns, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// shortName trims a long name (a C++ kernel signature, a command line)
// for a table cell.
func shortName(s string, n int) string { return clip(s, n) }

// cmdLine joins a command line for display, each argument quoted when it
// holds spaces or quotes (it is cleaned on its way out, with the rest of
// the line).
func cmdLine(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}
