package kmsg

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sanitize makes attacker-controlled kernel log text safe for a terminal:
// control characters (ESC, CR, BEL, ...) and invalid UTF-8 become \xNN
// escapes, so a process named "\x1b[2J" cannot clear the reader's screen.
// HTML outputs must still escape the result for HTML.
func Sanitize(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			for _, c := range []byte(s[i : i+n]) {
				b.WriteString(`\x`)
				b.WriteByte("0123456789abcdef"[c>>4])
				b.WriteByte("0123456789abcdef"[c&15])
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
