package golden

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoInternalReferencesInGoldens reads every golden file of the
// repository (what the commands print for every check fixture, every trace
// in testdata, every recording) and fails on any internal reference.
func TestNoInternalReferencesInGoldens(t *testing.T) {
	root := filepath.Join("..", "..")
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "fuzz" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !isGolden(path) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for _, r := range InternalReferences(string(b)) {
			t.Errorf("%s: %s", path, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 30 {
		t.Fatalf("read %d golden files: the walk missed them", n)
	}
	t.Logf("%d golden files read", n)
}

// isGolden: a file under a directory named golden, or a command's pinned
// output beside its inputs (cmd/gpufeed/testdata/*.text, *.json).
func isGolden(path string) bool {
	p := filepath.ToSlash(path)
	if strings.Contains(p, "testdata/") && strings.Contains(p, "/golden/") {
		return true
	}
	return strings.Contains(p, "cmd/gpufeed/testdata/") && (strings.HasSuffix(p, ".text") || strings.HasSuffix(p, ".json"))
}

func TestInternalReferencesFound(t *testing.T) {
	for _, s := range []string{
		"seed: 002 « Goulot I/O et stockage », Task 7-8, Checklist D",
		"Unset it (002 Task 1).", "see 000 §7", "(seed 000 §4)", "interval attribution, docs/RULES.md",
		"as issue 4 asks", "erreur courante 6", "(002 FAQ 1)", "internal/judge/frozen",
		"see internal/judge/rule_sync.go", `"symbol": "internal/runtime/syscall/linux.EpollWait", "file": "internal/judge/x.go"`,
	} {
		if len(InternalReferences(s)) == 0 {
			t.Errorf("%q: no internal reference found", s)
		}
	}
	for _, s := range []string{
		"GPU 0000:81:00.0", "0.002 s", "p95 launch call: 1.002 ms", "1002 retransmissions", "tasks blocked", "the checking thread",
		"/proc/27431/task/27431/schedstat", "2026-12-01 11:28:00.002 UTC", "https://pytorch.org/docs/stable/data.html",
		// A Go program's CPU profile names its standard library's functions.
		`"symbol": "internal/runtime/syscall/linux.EpollWait…"`, "in internal/poll.(*FD).Read",
	} {
		if r := InternalReferences(s); len(r) != 0 {
			t.Errorf("%q: false positive %v", s, r)
		}
	}
}
