package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
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
	if testing.Short() {
		t.Skip("-short: live attach runs")
	}
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
