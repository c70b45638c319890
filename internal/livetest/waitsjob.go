package livetest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// waitsJob is a Python process whose threads wait in known places: a lock
// (futex), a pipe read (read on the pipe), a sleep (clock_nanosleep,
// timed), select on the pipe with a timeout, and one thread spinning. Each
// "r" written to its stdin renames the lock's waiter ("renamed"), from the
// main thread, while it sleeps.
const waitsJob = `
import os, select, threading, time
lock = threading.Lock(); lock.acquire()
r, w = os.pipe()
def lockwait(): lock.acquire()
def piperead(): os.read(r, 1)
def nap(): time.sleep(3600)
def sel(): select.select([r], [], [], 3600)
def spin():
    while True: pass
for f in (lockwait, piperead, nap, sel, spin):
    threading.Thread(target=f, daemon=True, name=f.__name__).start()
time.sleep(0.3)
for t in threading.enumerate():
    print(t.name, t.native_id, flush=True)
print("ready", flush=True)
lw = [t for t in threading.enumerate() if t.name == "lockwait"][0].native_id
while os.read(0, 1) == b"r":
    with open("/proc/self/task/%d/comm" % lw, "w") as f:
        f.write("renamed")
`

// StartWaitsJob starts a Python process whose threads wait in known places
// (MainThread: a read of its stdin; lockwait: futex; piperead: read; nap:
// clock_nanosleep; sel: pselect6; spin: never): its pid, its threads' tids
// by name, and its stdin ("r" renames lockwait). It is killed at the test's
// end; the test is skipped without python3.
func StartWaitsJob(t *testing.T) (int, map[string]int, io.Writer) {
	t.Helper()
	pid, in, out := StartPython(t, waitsJob)
	tids := map[string]int{}
	for out.Scan() && out.Text() != "ready" {
		if name, v, ok := strings.Cut(out.Text(), " "); ok {
			tids[name], _ = strconv.Atoi(v)
		}
	}
	if len(tids) != 6 {
		t.Fatalf("the waits job's threads: %v", tids)
	}
	return pid, tids, in
}

// StartPython runs script with python3 -c: its pid, its stdin and its
// stdout's lines (its stderr is the test's). It is killed at the test's
// end; the test is skipped without python3.
func StartPython(t *testing.T, script string) (int, io.Writer, *bufio.Scanner) {
	t.Helper()
	Need(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	c := exec.Command(py, "-c", script)
	c.Stderr = os.Stderr
	in, out := Start(t, c)
	return c.Process.Pid, in, out
}

// Start starts c with pipes to its stdin and from its stdout (its stdout's
// lines returned); at the test's end its stdin is closed and it is killed
// and waited for.
func Start(t *testing.T, c *exec.Cmd) (io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); c.Process.Kill(); c.Wait() })
	return in, bufio.NewScanner(out)
}
