//go:build amd64 || arm64

package schedbpf

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// waitsJob is a Python process whose threads wait in known places: a lock
// (futex), a pipe read (read on the pipe's fd), a sleep (clock_nanosleep),
// select on a pipe, and one thread spinning. It prints each thread's tid.
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
os.read(0, 1)
`

// The kernel's reading of where threads wait is /proc's: for each asleep
// thread, the system call's number and arguments are those of
// /proc/PID/task/TID/syscall and the wait channel that of its wchan; a
// spinning thread reads running, as the syscall file says "running"; a
// thread not asked for is not read, and a tid of another process is not
// either.
func TestWaitsAreProcs(t *testing.T) {
	need(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	c := exec.Command(py, "-c", waitsJob)
	in, _ := c.StdinPipe()
	out, _ := c.StdoutPipe()
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); c.Process.Kill(); c.Wait() })
	tids := map[string]int{}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		if name, v, ok := strings.Cut(sc.Text(), " "); ok {
			n, _ := strconv.Atoi(v)
			tids[name] = n
		}
	}
	if len(tids) != 6 {
		t.Fatalf("threads %v", tids)
	}
	pid := c.Process.Pid
	tr := startCounters(t, pid)
	if ok, why := tr.ReadsWaits(); !ok {
		t.Fatalf("the waits reader did not load: %v", why)
	}
	arch := procfs.HostArch()
	fs := procfs.FS{Proc: "/proc", Sys: "/sys"}
	asleep := []string{"MainThread", "lockwait", "piperead", "nap", "sel"}
	ask := []int{os.Getpid()} // not pid's: never read
	for _, n := range asleep {
		ask = append(ask, tids[n])
	}
	ask = append(ask, tids["spin"])
	for round := range 3 {
		got, err := tr.ReadWaits(pid, ask)
		if err != nil {
			t.Fatal(err)
		}
		byTID := map[int]Wait{}
		for _, w := range got {
			byTID[w.TID] = w
		}
		if len(got) != len(ask)-1 {
			t.Errorf("round %d: %d records for %d threads of the process: %+v", round, len(got), len(ask)-1, got)
		}
		if _, ok := byTID[os.Getpid()]; ok {
			t.Errorf("round %d: a thread of another process was read", round)
		}
		if w := byTID[tids["spin"]]; !w.Running {
			t.Errorf("round %d: the spinning thread reads %+v, want running", round, w)
		}
		for _, n := range asleep {
			tid := tids[n]
			w, ok := byTID[tid]
			if !ok {
				t.Errorf("round %d: %s (%d) not read", round, n, tid)
				continue
			}
			sys, err := fs.ReadSyscall(pid, tid, arch)
			if err != nil {
				t.Fatal(err)
			}
			wchan, err := fs.ReadWchan(pid, tid)
			if err != nil {
				t.Fatal(err)
			}
			if w.Running || sys.Running {
				t.Errorf("round %d: %s reads running (kernel %v, /proc %v)", round, n, w.Running, sys.Running)
				continue
			}
			if w.Number != sys.Number || w.Args != sys.Args {
				t.Errorf("round %d: %s: kernel %d %#x, /proc %d %#x", round, n, w.Number, w.Args, sys.Number, sys.Args)
			}
			if w.Wchan != wchan || wchan == "" {
				t.Errorf("round %d: %s: wait channel %q in the kernel, %q in /proc", round, n, w.Wchan, wchan)
			}
			want := map[string]string{"lockwait": "futex", "piperead": "read", "nap": "clock_nanosleep", "sel": "pselect6"}[n]
			if name := procfs.SyscallName(arch, w.Number); want != "" && name != want && !(n == "sel" && name == "select") {
				t.Errorf("round %d: %s waits in %q, want %q", round, n, name, want)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	// What was asked is cleared: a reading asking nothing reads nothing.
	if got, err := tr.ReadWaits(pid, nil); err != nil || len(got) != 0 {
		t.Errorf("a reading asking nothing: %+v, %v", got, err)
	}
}
