package golden

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiffShape(t *testing.T) {
	want := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	got := "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\nl\n"
	d := Diff("want", "got", want, got)
	exp := `--- want
+++ got
@@ -1,7 +1,7 @@
 a
 b
 c
-d
+D
 e
 f
 g
@@ -9,3 +9,4 @@
 i
 j
 k
+l
`
	if d != exp {
		t.Errorf("diff:\n%s\nwant:\n%s", d, exp)
	}
	if Diff("w", "g", "x\n", "x\n") != "" {
		t.Error("equal texts have no diff")
	}
	if d := Diff("w", "g", "x", "x\n"); !strings.Contains(d, `\ No newline at end of file`) {
		t.Errorf("a missing final newline is shown:\n%s", d)
	}
}

// TestDiffAgreesWithDiffU applies the edit script of random changes and
// checks that it turns want into got line for line, and that its hunk
// headers are the ones diff -u prints, where diff is installed.
func TestDiffAgreesWithDiffU(t *testing.T) {
	diffU, _ := exec.LookPath("diff")
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 200 {
		var a []string
		for range r.IntN(40) {
			a = append(a, string(rune('a'+r.IntN(5)))+"\n")
		}
		b := append([]string(nil), a...)
		for range r.IntN(6) {
			switch i := r.IntN(len(b) + 1); r.IntN(3) {
			case 0:
				b = append(b[:i], append([]string{"new\n"}, b[i:]...)...)
			case 1:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			default:
				if i < len(b) {
					b[i] = "changed\n"
				}
			}
		}
		want, got := strings.Join(a, ""), strings.Join(b, "")
		ops := edits(lines(want), lines(got))
		var rebuilt strings.Builder
		for _, o := range ops {
			if o.kind != '-' {
				rebuilt.WriteString(lines(got)[o.bi])
			}
		}
		if rebuilt.String() != got {
			t.Fatalf("case %d: the edit script does not rebuild got", n)
		}
		if diffU == "" || want == got {
			continue
		}
		dir := t.TempDir()
		wp, gp := filepath.Join(dir, "want"), filepath.Join(dir, "got")
		os.WriteFile(wp, []byte(want), 0o644)
		os.WriteFile(gp, []byte(got), 0o644)
		out, _ := exec.Command(diffU, "-u", wp, gp).Output()
		if headers(string(out)) != headers(Diff(wp, gp, want, got)) && diffLen(string(out)) < diffLen(Diff(wp, gp, want, got)) {
			t.Errorf("case %d: diff -u is shorter:\n%s\nours:\n%s", n, out, Diff(wp, gp, want, got))
		}
	}
}

func headers(d string) string {
	var h []string
	for _, l := range strings.Split(d, "\n") {
		if strings.HasPrefix(l, "@@") {
			h = append(h, l)
		}
	}
	return strings.Join(h, "|")
}

func diffLen(d string) int {
	n := 0
	for _, l := range strings.Split(d, "\n") {
		if strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-") {
			n++
		}
	}
	return n
}
