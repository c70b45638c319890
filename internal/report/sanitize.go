package report

import (
	"strings"
	"unicode"
)

// Clean makes an attacker-controlled string (a process or thread name, a
// command line, a path) safe for a terminal: control characters, including
// ESC and the C1 range, become '?', so a name cannot move the cursor,
// recolour the screen or forge report lines.
func Clean(s string) string {
	clean := true
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar || r == '\u2028' || r == '\u2029' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			b.WriteByte('?')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// CleanArgs joins a command line for display, each argument cleaned and
// quoted when it holds spaces.
func CleanArgs(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		a = Clean(a)
		if a == "" || strings.ContainsAny(a, " \t'\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}
