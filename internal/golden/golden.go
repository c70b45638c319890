// Package golden compares test output with reviewed golden files: one
// helper, one -update flag, and a unified diff when they differ, for every
// package whose tests pin an output (the CLI's end-to-end runs, the kernel
// log recognisers, the trace judgement).
package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Update is the -update flag of every test binary that imports this
// package: rewrite the golden files with what the tests produce instead of
// comparing (review the change with git diff before committing it).
var Update = flag.Bool("update", false, "rewrite the golden files with the output the tests produce")

// Check compares got with the golden file at path. With -update it writes
// got there instead. A pinned output (a golden file under testdata/) that
// names an internal reference (a source document, an issue, a repository
// path) fails either way; a document pinned to the code (the architecture's
// import graph) may name packages. A difference fails the test with a unified diff of
// the file against got; a missing file fails it saying how to create it.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if isOutput(path) {
		for _, r := range InternalReferences(got) {
			t.Errorf("%s: an internal reference no user can follow: %s", path, r)
		}
	}
	if *Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if d := Diff(path, "got", string(want), got); d != "" {
		t.Errorf("output differs from %s (run the test with -update to accept it, after reading the diff):\n%s", path, d)
	}
}

// context is how many unchanged lines a hunk shows around a change.
const context = 3

// Diff returns a unified diff from want (named wantName) to got, or "" when
// they are equal. A missing final newline is shown as diff(1) shows it.
func Diff(wantName, gotName, want, got string) string {
	if want == got {
		return ""
	}
	a, b := lines(want), lines(got)
	ops := edits(a, b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", wantName, gotName)
	// Group the edit script into hunks separated by more than 2*context
	// unchanged lines.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-context)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(len(ops), end+context)
				break
			}
			end = run
		}
		var aStart, bStart, aLen, bLen int
		aStart, bStart = ops[start].ai, ops[start].bi
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", span(aStart, aLen), span(bStart, bLen))
		for _, op := range ops[start:end] {
			text := a
			n := op.ai
			if op.kind == '+' {
				text, n = b, op.bi
			}
			l := text[n]
			out.WriteByte(op.kind)
			out.WriteString(strings.TrimSuffix(l, "\n"))
			out.WriteByte('\n')
			if !strings.HasSuffix(l, "\n") {
				out.WriteString("\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return out.String()
}

func span(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// lines splits s after each newline, keeping it (the last line may lack one).
func lines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// op is one line of the edit script: kept (' '), removed from a ('-') or
// added from b ('+'), with its position in a and b.
type op struct {
	kind   byte
	ai, bi int
}

// edits is Myers' shortest edit script from a to b (E. Myers, "An O(ND)
// difference algorithm and its variations", 1986).
func edits(a, b []string) []op {
	n, m := len(a), len(b)
	maxD := n + m
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, v, off, n, m, d)
			}
		}
	}
	return nil
}

func backtrack(trace [][]int, last []int, off, x, y, d int) []op {
	var rev []op
	v := last
	for ; d > 0; d-- {
		k := x - y
		var prevK int
		if k == -d || (k != d && trace[d][off+k-1] < trace[d][off+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := trace[d][off+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x, y = x-1, y-1
			rev = append(rev, op{' ', x, y})
		}
		if x == prevX {
			y--
			rev = append(rev, op{'+', x, y})
		} else {
			x--
			rev = append(rev, op{'-', x, y})
		}
		v = trace[d]
	}
	_ = v
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		rev = append(rev, op{' ', x, y})
	}
	out := make([]op, len(rev))
	for i, o := range rev {
		out[len(rev)-1-i] = o
	}
	return out
}

// isOutput: golden files of what gpufeed prints live under testdata/.
func isOutput(path string) bool {
	p := "/" + filepath.ToSlash(path)
	return strings.Contains(p, "/testdata/")
}
