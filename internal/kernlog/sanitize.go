package kernlog

import "github.com/gpufeed/gpufeed/internal/safetext"

// Sanitize makes attacker-controlled kernel log text safe for a terminal:
// control characters (ESC, CR, BEL, ...), line separators, bidirectional
// controls and invalid UTF-8 become \xNN escapes (safetext.Escape), so a
// process named "\x1b[2J" cannot clear the reader's screen nor one named
// "\u202e..." reorder the line. HTML outputs must still escape the result
// for HTML.
func Sanitize(s string) string { return safetext.Escape(s) }
