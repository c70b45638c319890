package safetext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Wrap breaks s into lines of at most width characters at spaces, the
// first line starting with first, the others with rest; runs of spaces
// fold to one. A word longer than a line stays whole on a line of its
// own (a URL, a path): the caller clips such lines where its output must
// fit. With maxLines > 0 at most that many lines are kept, and the last
// one ends with "…" (cut to width) when text was left out. No words: no
// lines. It is the one word wrapper of the reports, the explain text and
// top's screen; it does not sanitise (Clean first).
func Wrap(s string, width int, first, rest string, maxLines int) []string {
	var lines []string
	cur, empty := first, true
	for _, w := range strings.Fields(s) {
		if !empty && utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) > width {
			lines = append(lines, cur)
			cur, empty = rest, true
		}
		if !empty {
			cur += " "
		}
		cur += w
		empty = false
	}
	if !empty {
		lines = append(lines, cur)
	}
	if maxLines > 0 && len(lines) > maxLines {
		lines = lines[:maxLines]
		last := lines[maxLines-1] + " …"
		if utf8.RuneCountInString(last) > width {
			last = string([]rune(last)[:max(width-1, 0)]) + "…"
		}
		lines[maxLines-1] = last
	}
	return lines
}

// Count writes n with its noun: "1 thread", "3 threads".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
