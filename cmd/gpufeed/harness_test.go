package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpufeed/gpufeed/internal/clitest"
)

// The tests here run gpufeed as a user would: the binary, built once for
// the whole test binary (internal/clitest), run with run or clitest.Run,
// its outputs compared with golden files by golden.Check (-update rewrites
// them, a difference prints a unified diff).

// Every run writes the same generated_at (render.Now honours
// SOURCE_DATE_EPOCH), so JSON outputs compare with their goldens.
func TestMain(m *testing.M) {
	os.Setenv("SOURCE_DATE_EPOCH", "1767225600") // 2026-01-01T00:00:00Z
	code := clitest.Main(m)
	stopStragglerJobs()
	stopPyTimeJob()
	os.Exit(code)
}

// stableJSON replaces this host's name in a JSON output with HOSTNAME, for
// goldens of outputs that name the host gpufeed runs on.
func stableJSON(out string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return out
	}
	return strings.ReplaceAll(out, `"hostname": "`+h+`"`, `"hostname": "HOSTNAME"`)
}

// holds reports whether a text output says want, wherever the output
// wrapped it to the terminal's width (at a space or, for a word longer
// than a line such as a path, inside it): whitespace is left out of both.
func holds(out, want string) bool {
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), "") }
	return strings.Contains(squeeze(out), squeeze(want))
}

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

// ran is one run of gpufeed: its stdout, stderr and exit status.
type ran struct {
	out, stderr string
	code        int
}

// runAtOnce runs gpufeed once per argument list, all at once, and returns
// each run's output and status in their order: observers of one job that
// read it, not each other, or outputs that judge nothing live.
func runAtOnce(t testing.TB, argss ...[]string) []ran {
	t.Helper()
	res := make([]ran, len(argss))
	var wg sync.WaitGroup
	for i, args := range argss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].out, res[i].stderr, res[i].code = run(t, args...)
		}()
	}
	wg.Wait()
	return res
}

// validateSchema checks a JSON output against the committed contract,
// docs/gpufeed.schema.json (outputs that cannot be golden: live runs).
func validateSchema(t testing.TB, out string) {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join("..", "..", "docs", "gpufeed.schema.json"))
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("not JSON: %v\n%.300s", err, out)
	}
	if err := s.Validate(doc); err != nil {
		t.Errorf("the output does not follow docs/gpufeed.schema.json:\n%v", err)
	}
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

// lightLive marks a live test whose job barely uses a CPU (idle, asleep,
// frozen, deadlocked or dead processes; HTTP, a browser, a terminal) and
// whose claims do not rest on CPU time: it runs in parallel with the other
// such tests, once the serial ones (busy jobs whose verdicts measure who
// had a CPU) are done. go test starts the parallel group only after every
// serial test of the package has finished, so they never disturb those.
func lightLive(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// sharesWithinTheJob marks a live test whose checks compare shares within
// the job (where one thread's Python time went): a load from outside the
// job shifts them all alike. make test runs these in its second lane,
// after that lane's packages (scripts/test.sh), one after the other: side
// by side (tried), three torch loops and their observers on 2 CPUs left a
// training thread waiting for a CPU 45 % of a 3 s window, and its sampled
// stacks too few for the judgement.
func sharesWithinTheJob(t *testing.T) {
	t.Helper()
}
