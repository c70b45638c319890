package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpufeed/gpufeed/internal/clitest"
)

// sharedTraces is where the real traces shared beside the repository live;
// the test reads them when they are there.
const sharedTraces = "../../../shared/traces"

// traceInputs lists every trace directory and file the first-screen and
// contradiction tests read: testdata/traces, the shared traces when
// present, the MTIA fixture.
func traceInputs(t *testing.T) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, root := range []string{"../../testdata/traces", sharedTraces, "/work/shared/traces"} {
		abs, err := filepath.Abs(root)
		if err != nil || seen[abs] {
			continue
		}
		seen[abs] = true
		dirs, _ := filepath.Glob(filepath.Join(root, "*"))
		more, _ := filepath.Glob(filepath.Join(root, "critical_path", "*"))
		for _, p := range append(dirs, more...) {
			if st, err := os.Stat(p); err != nil || !st.IsDir() || strings.HasSuffix(p, "critical_path") {
				continue
			}
			out = append(out, p)
		}
	}
	return append(out, "../../testdata/mtia/mtia_fixture.json")
}

// demoRecordings are the committed recordings of every demo scenario, and
// the trainer's.
func demoRecordings(t *testing.T) []string {
	t.Helper()
	recs, _ := filepath.Glob("testdata/*.gpufeed")
	if len(recs) < 16 {
		t.Fatalf("found %d recordings", len(recs))
	}
	return recs
}

var findingLine = regexp.MustCompile(`^  (CRITICAL|WARNING|INFO) |^  … and \d+ more`)

// checkFirstScreen: no line longer than width; before the first finding
// line, no line ends in "…" (the verdict, its numbers, the decision and
// what would conclude are wrapped whole, never cut).
func checkFirstScreen(t *testing.T, what string, width int, out string) {
	t.Helper()
	// In -v every line is whole (findings come after the verdict's block,
	// tables may cut a long name in a cell): only the width is checked.
	before := !strings.HasSuffix(what, " -v")
	for i, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > width {
			t.Errorf("%s at %d columns: line %d has %d columns: %q", what, width, i+1, n, l)
		}
		if findingLine.MatchString(l) {
			before = false
		}
		if before && strings.HasSuffix(l, "…") {
			t.Errorf("%s at %d columns: line %d is cut before the findings: %q", what, width, i+1, l)
		}
	}
}

func runWidth(t *testing.T, width int, args ...string) string {
	t.Helper()
	r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: args, Env: []string{fmt.Sprintf("COLUMNS=%d", width)}})
	if r.Code != 0 && r.Code != 1 {
		t.Fatalf("gpufeed %v: exit %d: %s", args, r.Code, r.Stderr)
	}
	return r.Stdout
}

// TestFirstScreensAreWhole: at 80, 100 and 120 columns the first screen of
// every demo recording (gpufeed report) and of every trace (gpufeed trace,
// each rank of a multi-rank trace) says its verdict, numbers, decision and
// what would conclude whole, wrapped with a hanging indent; -v wraps to the
// width too; check --quiet, a node gate's one output, is never cut.
func TestFirstScreensAreWhole(t *testing.T) {
	widths := []int{80, 100, 120}
	for _, rec := range demoRecordings(t) {
		for _, w := range widths {
			checkFirstScreen(t, rec, w, runWidth(t, w, "report", rec))
		}
		checkFirstScreen(t, rec+" -v", 80, runWidth(t, 80, "report", "-v", rec))
	}
	for _, tr := range traceInputs(t) {
		for _, w := range widths {
			out := runWidth(t, w, "trace", tr)
			checkFirstScreen(t, tr, w, out)
			if strings.HasPrefix(out, "RANKS: ") {
				for _, rank := range []string{"0", "1"} {
					checkFirstScreen(t, tr+" --rank "+rank, w, runWidth(t, w, "trace", "--rank", rank, tr))
				}
			}
		}
		checkFirstScreen(t, tr+" -v", 80, runWidth(t, 80, "trace", "-v", tr))
	}
	fixtures, _ := filepath.Glob("../../testdata/check/*/proc")
	for _, p := range fixtures {
		root := filepath.Dir(p)
		for _, w := range widths {
			args := []string{"check", "--root", root, "--device", "none", "--duration", "0", "--quiet"}
			if _, err := os.Stat(filepath.Join(p, "4242")); err == nil {
				args = append(args, "--pid", "4242")
			}
			out := runWidth(t, w, args...)
			for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
				if strings.HasSuffix(l, "…") || utf8.RuneCountInString(l) > w {
					t.Errorf("check --quiet on %s at %d columns: %q", root, w, l)
				}
			}
		}
	}
}
