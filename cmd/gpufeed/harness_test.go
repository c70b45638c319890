package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpufeed/gpufeed/internal/clitest"
)

// The tests here run gpufeed as a user would: the binary, built once for
// the whole test binary (internal/clitest), run with run or clitest.Run,
// its outputs compared with golden files by golden.Check (-update rewrites
// them, a difference prints a unified diff).

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

// gpufeed is the binary under test.
func gpufeed(t testing.TB) string {
	t.Helper()
	return clitest.Build(t, ".")
}

// run runs gpufeed with args and returns its stdout, stderr and exit status.
func run(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: args})
	return r.Stdout, r.Stderr, r.Code
}

// hostRoot lays out a directory as --root wants it: proc and sys (either
// may be "": then absent) linked from fixture trees, as a container sees
// the host's / mounted at /host.
func hostRoot(t testing.TB, proc, sys string) string {
	t.Helper()
	dir := t.TempDir()
	for name, target := range map[string]string{"proc": proc, "sys": sys} {
		if target == "" {
			continue
		}
		abs, err := filepath.Abs(target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
