package testjob

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/kernlog"
)

// These tests check that each workload really puts the machine in the state
// it claims, reading /proc and the kernel log directly.

func start(t *testing.T, w Script, args ...string) *Run {
	t.Helper()
	r, err := Start(t.Context(), w, nil, args...)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stopping %s: %v", w, err)
		}
	})
	return r
}

func await(t *testing.T, r *Run, event string) Message {
	t.Helper()
	m, err := r.Await(t.Context(), event, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func procFile(pid, tid int, name string) string {
	if tid == 0 {
		return fmt.Sprintf("/proc/%d/%s", pid, name)
	}
	return fmt.Sprintf("/proc/%d/task/%d/%s", pid, tid, name)
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// blockedIn says whether a thread sleeps in the given system call number
// with a wchan containing want.
func blockedIn(t *testing.T, pid, tid int, syscallNr string, wchan string) bool {
	t.Helper()
	sc := strings.Fields(read(t, procFile(pid, tid, "syscall")))
	wc := read(t, procFile(pid, tid, "wchan"))
	return len(sc) > 0 && sc[0] == syscallNr && strings.Contains(wc, wchan)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const (
	sysRead  = "0"   // x86-64
	sysFutex = "202" // x86-64
)

func requireAMD64Syscalls(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/syscall"); err != nil {
		t.Skip("no /proc/PID/syscall (CONFIG_HAVE_ARCH_TRACEHOOK):", err)
	}
	if b, _ := os.ReadFile("/proc/sys/kernel/arch"); len(b) > 0 && strings.TrimSpace(string(b)) != "x86_64" {
		t.Skip("syscall numbers checked here are x86-64's")
	}
}

func TestOOMRanksReallyKilled(t *testing.T) {
	requireAMD64Syscalls(t)
	o, err := StartOOMRanks(t.Context(), 2)
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Stop() })
	if o.KilledBy != 9 {
		t.Errorf("the victim ended by signal %d, want SIGKILL", o.KilledBy)
	}
	victimPID := o.Ranks[2]
	// The kernel logged the kill, naming the victim's pid and its cgroup.
	var kill *kernlog.Kill
	eventually(t, "the OOM kill in the kernel log", func() bool {
		log, err := (&kernlog.Reader{}).Read(t.Context())
		if err != nil {
			t.Skip("kernel log not readable:", err)
		}
		for _, k := range kernlog.Kills(kernlog.Events(log.Entries)) {
			if k.PID == victimPID {
				kill = &k
				return true
			}
		}
		return false
	})
	if kill.Constraint != "CONSTRAINT_MEMCG" || kill.MemCG != o.Cgroup.Path || kill.LimitBytes != OOMRanksLimit || kill.ResidentBytes < 32<<20 {
		t.Errorf("kill report %+v (cgroup %s)", *kill, o.Cgroup.Path)
	}
	// Ranks 0 and 1 are alive, blocked in read() on a pipe, for good.
	for _, rank := range []int{0, 1} {
		pid := o.Ranks[rank]
		eventually(t, fmt.Sprintf("rank %d blocked in read on a pipe", rank), func() bool {
			return blockedIn(t, pid, 0, sysRead, "pipe")
		})
		env := read(t, procFile(pid, 0, "environ"))
		if !strings.Contains(env, "RANK="+strconv.Itoa(rank)+"\x00") {
			t.Errorf("rank %d's environment has no RANK=%d", rank, rank)
		}
	}
}

// privateBytes is a process's unique memory (USS): Private_Clean +
// Private_Dirty from smaps_rollup.
func privateBytes(t *testing.T, pid int) uint64 {
	t.Helper()
	var sum uint64
	for _, line := range strings.Split(read(t, procFile(pid, 0, "smaps_rollup")), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "Private_Clean:" || f[0] == "Private_Dirty:") {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			sum += kb << 10
		}
	}
	return sum
}

func TestCOWObjectsGrowArrayStaysFlat(t *testing.T) {
	growth := map[string]uint64{}
	for _, storage := range []string{"objects", "array"} {
		r := start(t, COW, "--storage", storage, "--workers", "2", "--items", "1000000", "--seconds", "3")
		m := await(t, r, "workers")
		workers := m.Ints("workers")
		if len(workers) != 2 {
			t.Fatalf("workers %v", workers)
		}
		before := privateBytes(t, workers[0])
		await(t, r, "walked")
		after := privateBytes(t, workers[0])
		growth[storage] = after - min(before, after)
		// forked workers run the parent's command line (fork, no exec)
		if read(t, procFile(workers[0], 0, "cmdline")) != read(t, procFile(r.PID, 0, "cmdline")) {
			t.Errorf("a forked worker should share its parent's command line")
		}
		r.Stop()
	}
	t.Logf("USS growth of one worker: objects %d MiB, array %d MiB", growth["objects"]>>20, growth["array"]>>20)
	if growth["objects"] < 10<<20 {
		t.Errorf("walking a list of float objects should copy pages: grew only %d KiB", growth["objects"]>>10)
	}
	if growth["array"] > 4<<20 || growth["array"]*5 > growth["objects"] {
		t.Errorf("walking an array should not copy its pages: grew %d KiB", growth["array"]>>10)
	}
}

func TestCOWSpawnWorkersRunSpawnMain(t *testing.T) {
	r := start(t, COW, "--storage", "array", "--workers", "1", "--items", "1000", "--seconds", "0.1", "--start", "spawn")
	m := await(t, r, "workers")
	// spawn does not wait for the child's exec: read until it has happened
	worker := m.Ints("workers")[0]
	eventually(t, "the spawned worker running spawn_main", func() bool {
		return strings.Contains(read(t, procFile(worker, 0, "cmdline")), "from multiprocessing.spawn import spawn_main")
	})
}

func fdCount(t *testing.T, pid int) int {
	t.Helper()
	es, err := os.ReadDir(procFile(pid, 0, "fd"))
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func TestFDLeakGrowsTowardSoftLimit(t *testing.T) {
	r := start(t, FDLeak, "--soft", "200", "--rate", "50")
	await(t, r, "limit")
	limits := read(t, procFile(r.PID, 0, "limits"))
	if !strings.Contains(limits, "Max open files            200") {
		t.Errorf("soft limit not lowered:\n%s", limits)
	}
	n0 := fdCount(t, r.PID)
	time.Sleep(500 * time.Millisecond)
	n1 := fdCount(t, r.PID)
	if n1 <= n0 {
		t.Errorf("fds did not grow: %d -> %d", n0, n1)
	}
	kinds := map[string]int{}
	es, _ := os.ReadDir(procFile(r.PID, 0, "fd"))
	for _, e := range es {
		target, err := os.Readlink(filepath.Join(procFile(r.PID, 0, "fd"), e.Name()))
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(target, "socket:"):
			kinds["socket"]++
		case strings.HasPrefix(target, "pipe:"):
			kinds["pipe"]++
		case strings.Contains(target, "shard-"):
			kinds["file"]++
		}
	}
	if kinds["socket"] == 0 || kinds["pipe"] == 0 || kinds["file"] == 0 {
		t.Errorf("leaked kinds %v", kinds)
	}
	m := await(t, r, "exhausted")
	if errno, _ := m.Int("errno"); errno != 24 {
		t.Errorf("exhaustion errno %d, want EMFILE (24)", errno)
	}
}

func TestPipeHangBothBlockedInRead(t *testing.T) {
	requireAMD64Syscalls(t)
	r := start(t, PipeHang)
	m := await(t, r, "waiting")
	child, _ := m.Int("child")
	for _, pid := range []int{r.PID, child} {
		eventually(t, fmt.Sprintf("pid %d blocked in read on a pipe", pid), func() bool {
			return blockedIn(t, pid, 0, sysRead, "pipe")
		})
	}
}

func TestFutexHangWaitersInFutex(t *testing.T) {
	requireAMD64Syscalls(t)
	r := start(t, FutexHang, "--waiters", "3")
	m := await(t, r, "waiting")
	waiters := m.Ints("waiters")
	if len(waiters) != 3 {
		t.Fatalf("waiters %v", waiters)
	}
	for _, tid := range append(waiters, r.PID) {
		eventually(t, fmt.Sprintf("thread %d blocked in futex", tid), func() bool {
			return blockedIn(t, r.PID, tid, sysFutex, "futex")
		})
	}
	holder, _ := m.Int("holder")
	if sc := strings.Fields(read(t, procFile(r.PID, holder, "syscall"))); len(sc) == 0 || sc[0] == sysFutex {
		t.Errorf("the holder should sleep, not wait on the lock: syscall %v", sc)
	}
}

// schedstat reads a thread's time on a CPU and time runnable waiting for
// one, in nanoseconds.
func schedstat(t *testing.T, pid, tid int) (run, wait uint64) {
	t.Helper()
	f := strings.Fields(read(t, procFile(pid, tid, "schedstat")))
	run, _ = strconv.ParseUint(f[0], 10, 64)
	wait, _ = strconv.ParseUint(f[1], 10, 64)
	return run, wait
}

// TestGILThreadsShareOneCore checks the GIL's signature in a way that holds
// on a loaded machine too. A thread spinning without the GIL wants a CPU all
// the time: its time running plus its time runnable-but-waiting equals the
// wall time, whatever the load. Threads spinning in Python code take turns:
// while one holds the GIL the others sleep, so together they want about
// one CPU however many there are.
func TestGILThreadsShareOneCore(t *testing.T) {
	r := start(t, GILThreads, "--threads", "3")
	m := await(t, r, "spinning")
	threads := m.Ints("threads")
	type ss struct{ run, wait uint64 }
	before := make([]ss, len(threads))
	for i, tid := range threads {
		before[i].run, before[i].wait = schedstat(t, r.PID, tid)
	}
	began := time.Now()
	time.Sleep(3 * time.Second)
	elapsed := time.Since(began).Seconds()
	var run, demand float64
	for i, tid := range threads {
		r1, w1 := schedstat(t, r.PID, tid)
		if r1 == before[i].run {
			t.Errorf("thread %d never ran", tid)
		}
		run += float64(r1-before[i].run) / 1e9 / elapsed
		demand += float64(r1-before[i].run+w1-before[i].wait) / 1e9 / elapsed
	}
	t.Logf("3 spinning Python threads: %.2f cores used, %.2f CPUs wanted (3.0 without a GIL)", run, demand)
	if run > 1.3 {
		t.Errorf("pure-Python threads used %.2f cores: more than the GIL allows", run)
	}
	if demand > 0.75*float64(len(threads)) {
		t.Errorf("the threads wanted %.2f CPUs: spinning threads without a GIL want %d", demand, len(threads))
	}
}
