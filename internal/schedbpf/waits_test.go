//go:build amd64 || arm64

package schedbpf

import (
	"os"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// The kernel's reading of where threads wait is /proc's: for each asleep
// thread, the system call's number and arguments are those of
// /proc/PID/task/TID/syscall and the wait channel that of its wchan; a
// spinning thread reads running, as the syscall file says "running"; a
// thread not asked for is not read, and a tid of another process is not
// either.
func TestWaitsAreProcs(t *testing.T) {
	need(t)
	pid, tids, _ := livetest.StartWaitsJob(t)
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

// The kernel's reading of a thread's stat facts is /proc's: its name,
// start time and (for a thread asleep) state are those of
// /proc/PID/task/TID/stat, its utime and stime lie between stat's read
// right before and right after (the spinning thread's too, computed from the
// task's CPU times as the kernel computes them), and its CPU is one of the
// host's. A thread not asked for is not read.
func TestFactsAreStats(t *testing.T) {
	need(t)
	pid, tids, _ := livetest.StartWaitsJob(t)
	tr := startCounters(t, pid)
	fs := procfs.FS{Proc: "/proc", Sys: "/sys"}
	stat := func(tid int) procfs.Stat {
		var st procfs.Stat
		b, err := os.ReadFile(fs.TaskPath(pid, tid, "stat"))
		if err != nil {
			t.Fatal(err)
		}
		if err := procfs.ParseStat(b, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	var ask []int
	for name, tid := range tids {
		if name != "lockwait" {
			ask = append(ask, tid)
		}
	}
	for round := range 3 {
		before := map[int]procfs.Stat{}
		for _, tid := range ask {
			before[tid] = stat(tid)
		}
		got, err := tr.ReadFacts(pid, ask)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ask) {
			t.Fatalf("round %d: %d records for %d threads asked: %+v", round, len(got), len(ask), got)
		}
		for _, f := range got {
			b, a := before[f.TID], stat(f.TID)
			if f.TID == tids["lockwait"] {
				t.Errorf("round %d: a thread not asked for was read", round)
			}
			if f.Comm != string(a.Comm) || f.StartTime != a.StartTime {
				t.Errorf("round %d: thread %d: name %q start %d; stat %q %d", round, f.TID, f.Comm, f.StartTime, a.Comm, a.StartTime)
			}
			if f.UTime < b.UTime || f.UTime > a.UTime || f.STime < b.STime || f.STime > a.STime {
				t.Errorf("round %d: thread %d: utime %d stime %d; stat %d %d before, %d %d after", round, f.TID, f.UTime, f.STime, b.UTime, b.STime, a.UTime, a.STime)
			}
			if f.TID != tids["spin"] && (f.State != a.State || f.State != 'S') {
				t.Errorf("round %d: thread %d: state %q, stat %q", round, f.TID, f.State, a.State)
			}
			if f.CPU < 0 || f.CPU >= 4096 {
				t.Errorf("round %d: thread %d: CPU %d", round, f.TID, f.CPU)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cputimeAdjusted is the kernel's cputime_adjust: the tick-counted split
// scaled to the run time, never below the last values given.
func TestCputimeAdjusted(t *testing.T) {
	for _, c := range []struct{ u, s, r, pu, ps, wu, ws uint64 }{
		{u: 30, s: 10, r: 80, wu: 60, ws: 20},
		{u: 0, s: 10, r: 80, ws: 80},
		{u: 10, s: 0, r: 80, wu: 80},
		{u: 30, s: 10, r: 80, pu: 70, ps: 5, wu: 70, ws: 10},
		{u: 30, s: 10, r: 80, pu: 50, ps: 40, wu: 50, ws: 40}, // prev already covers the run time
		{u: 1 << 62, s: 1 << 62, r: 1 << 63, wu: 1 << 62, ws: 1 << 62},
	} {
		if u, s := cputimeAdjusted(c.u, c.s, c.r, c.pu, c.ps); u != c.wu || s != c.ws {
			t.Errorf("cputimeAdjusted(%d, %d, %d, prev %d %d) = %d, %d; want %d, %d", c.u, c.s, c.r, c.pu, c.ps, u, s, c.wu, c.ws)
		}
	}
}
