package pyspy

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// py-spy dump pauses the target while it reads it unless told not to
// (--nonblocking): gpufeed never stops the job it watches, so the fallback
// asks for the read without a pause, as the built-in reader does.
func TestDumpRunsPySpy(t *testing.T) {
	data, _ := os.ReadFile("../profile/testdata/futexhang.txt")
	var asked []string
	run := func(_ context.Context, name string, args ...string) ([]byte, error) {
		asked = append([]string{name}, args...)
		return data, nil
	}
	raw, ps, err := Dump(t.Context(), 31337, run)
	if err != nil || len(ps) != 1 || len(raw) != len(data) || strings.Join(asked, " ") != "py-spy dump --nonblocking --pid 31337" {
		t.Errorf("%v %v %v", asked, ps, err)
	}
	failing := func(context.Context, string, ...string) ([]byte, error) { return nil, errors.New("Permission denied") }
	if _, _, err := Dump(t.Context(), 1, failing); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("%v", err)
	}
}

// TestLivePySpy is skipped where py-spy is not installed (here: no PyPI).
func TestLivePySpy(t *testing.T) {
	_, _, err := Dump(t.Context(), os.Getpid(), nil)
	if errors.Is(err, ErrNotInstalled) {
		if !strings.Contains(err.Error(), "pip install py-spy") {
			t.Errorf("the error should say how to get py-spy: %v", err)
		}
		t.Skip(err)
	}
	// The Go test binary is no Python process: py-spy must fail, not hang.
	if err == nil {
		t.Error("py-spy dumped a non-Python process")
	}
}
