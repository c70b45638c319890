package safetext

import (
	"slices"
	"testing"
)

// TestWrap holds the cases of the three word wrappers Wrap replaced: the
// explain text's (no prefixes, any number of lines, a long word whole),
// the reports' (hanging indent, at most N lines ending in "…") and top's
// (at most N lines, the same mark).
func TestWrap(t *testing.T) {
	for _, c := range []struct {
		s           string
		width       int
		first, rest string
		max         int
		want        []string
	}{
		// explain: at most width runes, a URL whole on its own line.
		{"one two three four", 9, "", "", 0, []string{"one two", "three", "four"}},
		{"see https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html now", 20, "", "", 0,
			[]string{"see", "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html", "now"}},
		{"  ", 10, "", "", 0, nil},
		{"éé éé éé", 5, "", "", 0, []string{"éé éé", "éé"}},
		// the reports: first and rest prefixes, spaces folded, at most 2 lines.
		{"a  b c d e f g h", 7, "- ", "  ", 0, []string{"- a b c", "  d e f", "  g h"}},
		{"a b c d e f g h", 7, "- ", "  ", 2, []string{"- a b c", "  d e …"}},
		{"aaa bbb ccc ddd", 7, "", "", 1, []string{"aaa bb…"}},
		// top: three lines of a long summary.
		{"the GPU idles 60% of the window while the launch thread is on a CPU all of it", 20, "", "", 3,
			[]string{"the GPU idles 60% of", "the window while the", "launch thread is on…"}},
		{"short", 20, "", "", 3, []string{"short"}},
	} {
		if got := Wrap(c.s, c.width, c.first, c.rest, c.max); !slices.Equal(got, c.want) {
			t.Errorf("Wrap(%q, %d, %q, %q, %d) = %q, want %q", c.s, c.width, c.first, c.rest, c.max, got, c.want)
		}
	}
}
