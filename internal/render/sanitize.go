package render

import (
	"strings"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// Clean makes an attacker-controlled string (a process or thread name, a
// command line, a path) safe for a terminal: control characters (including
// ESC and the C1 range), line separators and bidirectional controls become
// '?', so a name cannot move the cursor, recolour the screen, forge report
// lines or reorder them; text past safetext.MaxRunes is cut.
func Clean(s string) string { return safetext.Clean(s) }

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
