package render

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestWrapNeverCuts: wrapWhole and wrapLine keep every character (a word
// longer than a line is split, not clipped), fit the width, and wrapLine
// keeps a table row's spacing up to its break.
func TestWrapNeverCuts(t *testing.T) {
	long := "VERDICT: submission-bound (confidence 80%): " + strings.Repeat("word ", 30) + "/tmp/" + strings.Repeat("x", 130) + " end"
	for _, w := range []int{40, 80, 120} {
		lines := wrapWhole(long, w, "", "  ")
		for _, l := range lines {
			if utf8.RuneCountInString(l) > w || strings.HasSuffix(l, "…") {
				t.Errorf("width %d: %q", w, l)
			}
		}
		if got := strings.Join(strings.Fields(strings.Join(lines, "")), ""); got != strings.Join(strings.Fields(long), "") {
			t.Errorf("width %d: text lost:\n%s", w, strings.Join(lines, "\n"))
		}
	}
	row := "  27493  python3  main  1.1%/1.3%/1.6%   82%   0.5%/1.8%           31.5   31.7     S      recvmsg on socket:[3792383] in unix_stream_read_generic"
	lines := wrapLine(row, 80)
	if !strings.HasPrefix(lines[0], "  27493  python3  main  1.1%/1.3%/1.6%   82%") {
		t.Errorf("spacing lost: %q", lines[0])
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "      ") || utf8.RuneCountInString(l) > 80 {
			t.Errorf("continuation %q: want the row's indent plus four, within 80 columns", l)
		}
	}
	if got := wrapLine("short", 80); len(got) != 1 || got[0] != "short" {
		t.Errorf("short line: %q", got)
	}
}
