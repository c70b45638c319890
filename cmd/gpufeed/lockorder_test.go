package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// lockOrderDeadlock: two threads take two locks in opposite order and
// deadlock; the main thread joins them. Line 8 is where "one" waits for b,
// line 14 where "two" waits for a, line 21 the main thread's join.
const lockOrderDeadlock = `import threading, time
a = threading.Lock()
b = threading.Lock()
def one():
    with a:
        time.sleep(0.2)
        while True:
            with b:
                pass
def two():
    with b:
        time.sleep(0.2)
        while True:
            with a:
                pass
t1 = threading.Thread(target=one)
t2 = threading.Thread(target=two)
t1.start(); t2.start()
time.sleep(0.5)
print("ready", flush=True)
t1.join()
`

// TestLockOrderDeadlockStacksOnFirstScreen: attached with --py-stacks to a
// process whose two threads deadlock on two locks, the default first
// screen of the stalled verdict shows each thread's Python line.
func TestLockOrderDeadlockStacksOnFirstScreen(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	script := filepath.Join(t.TempDir(), "deadlock.py")
	if err := os.WriteFile(script, []byte(lockOrderDeadlock), 0o644); err != nil {
		t.Fatal(err)
	}
	w := startWorkload(t, nil, true, python, script)
	q := regexp.QuoteMeta(filepath.Base(script))
	want := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^WHERE EACH THREAD WAITS \(Python stacks\):$`),
		regexp.MustCompile(`(?m)^  thread \d+ .*: at one \(` + q + `:8\)`),
		regexp.MustCompile(`(?m)^  thread \d+ .*: at two \(` + q + `:14\)`),
		regexp.MustCompile(`(?m)^  thread ` + strconv.Itoa(w.Process.Pid) + ` .*: at <module> \(` + q + `:21\)`),
	}
	var wg sync.WaitGroup
	for i, window := range []string{"3s", "3s", "4s"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, stderr, code := run(t, "diagnose", "--device", "none", "--py-stacks", "--pid", strconv.Itoa(w.Process.Pid), "--duration", window)
			if code != 0 {
				t.Errorf("run %d: exit %d: %s", i, code, stderr)
				return
			}
			if !strings.HasPrefix(out, "VERDICT: stalled") {
				t.Errorf("run %d: not stalled:\n%s", i, out)
			}
			for _, re := range want {
				if !re.MatchString(out) {
					t.Errorf("run %d (%s): the first screen lacks %s:\n%s", i, window, re, out)
				}
			}
		}()
	}
	wg.Wait()
}

// lockCycle is a deadlock of n threads over n locks taken in a cycle:
// thread i holds lock i and waits for lock i+1 (mod n), on the line marked
// "# waits i"; the main thread joins the first, on the line marked
// "# joins".
func lockCycle(n int) string {
	var b strings.Builder
	b.WriteString("import threading, time\n")
	fmt.Fprintf(&b, "locks = [threading.Lock() for _ in range(%d)]\n", n)
	for i := range n {
		fmt.Fprintf(&b, "def t%d():\n    with locks[%d]:\n        time.sleep(0.2)\n        while True:\n            with locks[%d]:  # waits %d\n                pass\n", i, i, (i+1)%n, i)
	}
	fmt.Fprintf(&b, "ts = [threading.Thread(target=f) for f in (%s)]\n", strings.Join(func() []string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("t%d", i))
		}
		return s
	}(), ", "))
	b.WriteString("for t in ts: t.start()\ntime.sleep(0.5)\nprint(\"ready\", flush=True)\nts[0].join()  # joins\n")
	return b.String()
}

// srcLine is the 1-based line of a script's source that ends in marker.
func srcLine(t *testing.T, script, marker string) int {
	t.Helper()
	for i, l := range strings.Split(script, "\n") {
		if strings.HasSuffix(l, marker) {
			return i + 1
		}
	}
	t.Fatalf("no line ends in %q", marker)
	return 0
}

// pyenvPythons are the CPython 3.8-3.13 interpreters pyenv installed on
// this machine, by minor version.
func pyenvPythons() map[string]string {
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".pyenv")
	}
	found := map[string]string{}
	for minor := 8; minor <= 13; minor++ {
		v := fmt.Sprintf("3.%d", minor)
		m, _ := filepath.Glob(filepath.Join(root, "versions", v+".*", "bin", "python"+v))
		if len(m) > 0 {
			found[v] = m[len(m)-1]
		}
	}
	return found
}

// TestLockCycleDeadlocksOnEveryCPython: deadlocks of two and of three
// threads, each on every CPython from 3.8 to 3.13 installed here, attached
// with --py-stacks: stalled, and the first screen shows every waiting
// thread's own line and the main thread's join.
func TestLockCycleDeadlocksOnEveryCPython(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	pythons := pyenvPythons()
	if len(pythons) == 0 {
		t.Skip("no pyenv CPython 3.8-3.13 on this machine")
	}
	versions := make([]string, 0, len(pythons))
	for v := range pythons {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	t.Logf("CPython %s", strings.Join(versions, ", "))
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			var wg sync.WaitGroup
			for _, n := range []int{2, 3} {
				src := lockCycle(n)
				script := filepath.Join(t.TempDir(), fmt.Sprintf("cycle%d.py", n))
				if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				w := startWorkload(t, nil, true, pythons[v], script)
				q := regexp.QuoteMeta(filepath.Base(script))
				// The decision names the deadlock and points at the stacks
				// shown, not at the flag that was given.
				want := []*regexp.Regexp{regexp.MustCompile(`wait on each other,\s+a\s+deadlock`), regexp.MustCompile(`The\s+Python\s+stacks\s+below\s+show`),
					regexp.MustCompile(`(?m)^WHERE EACH THREAD WAITS \(Python stacks\):$`),
					regexp.MustCompile(`(?m)^  thread ` + strconv.Itoa(w.Process.Pid) + ` .*: at <module> \(` + q + `:` + strconv.Itoa(srcLine(t, src, "# joins")) + `\)`)}
				for i := range n {
					want = append(want, regexp.MustCompile(fmt.Sprintf(`(?m)^  thread \d+ .*: at t%d \(%s:%d\)`, i, q, srcLine(t, src, fmt.Sprintf("# waits %d", i)))))
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					out, stderr, code := run(t, "diagnose", "--device", "none", "--py-stacks", "--pid", strconv.Itoa(w.Process.Pid), "--duration", "3s")
					if code != 0 {
						t.Errorf("%d threads: exit %d: %s", n, code, stderr)
						return
					}
					if !strings.HasPrefix(out, "VERDICT: stalled") {
						t.Errorf("%d threads: not stalled:\n%s", n, out)
					}
					for _, re := range want {
						if !re.MatchString(out) {
							t.Errorf("%d threads: the first screen lacks %s:\n%s", n, re, out)
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
