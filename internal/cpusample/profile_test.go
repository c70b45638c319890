package cpusample

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// needPerf skips when this test process may not sample every CPU (the
// denied path has its own tests).
func needPerf(t *testing.T) {
	t.Helper()
	if err := Check(""); err != nil {
		t.Skipf("CPU sampling not allowed here: %v", err)
	}
}

// buildJob compiles the stand-in driver as libcuda.so.1 and the job
// program linked to it, in a temp dir.
func buildJob(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcuda.so.1")
	for _, args := range [][]string{
		// stripped, as the released driver is: only the entry points are named
		{"-O2", "-s", "-shared", "-fPIC", "-fvisibility=hidden", "-o", lib, "testdata/driver.c"},
		// with frame pointers, as Python 3.12 and Fedora's and Ubuntu's
		// builds are: the kernel's walk past a frameless leaf lands in it
		{"-O2", "-fno-omit-frame-pointer", "-o", filepath.Join(dir, "job"), "testdata/job.c", lib, "-lz", "-Wl,-rpath," + dir},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	return filepath.Join(dir, "job")
}

// running starts cmd, waits for its first output line ("ready"), and
// kills it when the test ends: the profile attaches to a running process.
func running(t *testing.T, name string, args ...string) int {
	t.Helper()
	cmd := exec.Command(name, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("%s: want ready, got %q (%v)", name, line, err)
	}
	return cmd.Process.Pid
}

// profileOf profiles pid for at least window, and on until its main thread
// has 15 samples (a thread that yields, on a loaded host, runs seldom) or
// 8 s have passed.
func profileOf(t *testing.T, pid int, window time.Duration) profile.ThreadCPU {
	t.Helper()
	p, err := Start(Options{Keep: func(p int) bool { return p == pid }})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(window)
	for start := time.Now(); time.Since(start) < 8*time.Second-window; time.Sleep(250 * time.Millisecond) {
		p.mu.Lock()
		n := 0
		if th := p.threads[pid]; th != nil {
			n = th.samples
		}
		p.mu.Unlock()
		if n >= 15 {
			break
		}
	}
	prof := p.Stop()
	th, ok := prof.Thread(pid)
	if !ok {
		t.Fatalf("no samples of the job's main thread %d: %+v", pid, prof)
	}
	t.Logf("%d samples, lost %d, unresolved %d; categories %v; top %+v", th.Samples, prof.Lost, prof.Unresolved, th.Categories, th.Top)
	for _, o := range prof.Threads {
		if o.PID != pid {
			t.Errorf("a thread of another process kept: %+v", o)
		}
	}
	return th
}

// Each mode of the job, attached to while it runs, repeated: the main
// thread's CPU lands in the category its code is, with the symbol named.
func TestAttachedJobShares(t *testing.T) {
	livetest.Need(t)
	needPerf(t)
	job := buildJob(t)
	for _, c := range []struct {
		mode string
		cat  profile.Category
		sym  string
	}{
		{"launch", profile.DriverLaunch, "cuLaunchKernel"},
		{"sync", profile.DriverSync, "cuStreamSynchronize"},
		// the spin is in unnamed internal code: the entry point on the
		// sampled stack names it
		{"ctxsync", profile.DriverSync, "cuCtxSynchronize"},
		// the wait is in the kernel (sched_yield), entered from the driver:
		// the driver's, not the thread's own kernel time
		{"yield", profile.DriverSync, "cuEventSynchronize"},
		{"decode", profile.Decode, ""},
	} {
		for round := 0; round < 2; round++ {
			pid := running(t, job, c.mode)
			th := profileOf(t, pid, time.Second)
			if th.Samples < 10 {
				t.Fatalf("%s: only %d samples in 8 s at 99 Hz of a busy thread", c.mode, th.Samples)
			}
			if share := th.Share(c.cat); share < 0.6 {
				t.Errorf("%s round %d: %s share %.2f, want most of the thread's CPU: %v", c.mode, round, c.cat, share, th.Categories)
			}
			if c.sym != "" {
				if top, ok := th.TopIn(c.cat); !ok || top.Symbol != c.sym || top.File != "libcuda.so.1" {
					t.Errorf("%s: top %s symbol %+v, want %s in libcuda.so.1", c.mode, c.cat, top, c.sym)
				}
			}
		}
	}
}

// Python's own eval loop, in the interpreter on PATH and in Debian's.
func TestAttachedPythonInterpreter(t *testing.T) {
	livetest.Need(t)
	needPerf(t)
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if _, err := exec.LookPath(py); err != nil {
			continue
		}
		pid := running(t, py, "-u", "-c", "print('ready')\nwhile True: sum(i * i for i in range(1000))")
		// pyenv's python3 is a shim that execs the real one: the pid stays.
		th := profileOf(t, pid, time.Second)
		if share := th.Share(profile.Interpreter); share < 0.6 {
			t.Errorf("%s: interpreter share %.2f, want most: %v %+v", py, share, th.Categories, th.Top)
		}
	}
}

// A fixture proc root with perf_event_paranoid 2 and no capability says
// what would allow it; paranoid 0 allows it without a capability.
func TestCheckFixture(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("self/status", "Name:\tx\nCapEff:\t0000000000000000\n")
	write("sys/kernel/perf_event_paranoid", "2\n")
	err := Check(root)
	var u *Unavailable
	if !errors.As(err, &u) || !strings.Contains(u.Missing, "CAP_PERFMON") || !strings.Contains(u.Missing, "perf_event_paranoid at 0 or below (it is 2)") {
		t.Fatalf("paranoid 2, no caps: %v", err)
	}
	write("self/status", "Name:\tx\nCapEff:\t0000004000000000\n") // CAP_PERFMON
	if err := Check(root); err != nil {
		t.Errorf("CAP_PERFMON: %v", err)
	}
	write("self/status", "Name:\tx\nCapEff:\t0000000000000000\n")
	write("sys/kernel/perf_event_paranoid", "0\n")
	if err := Check(root); err != nil {
		t.Errorf("paranoid 0: %v", err)
	}
	write("sys/kernel/perf_event_paranoid", "x\n")
	if err := Check(root); err == nil || !strings.Contains(err.Error(), "want an integer") {
		t.Errorf("bad paranoid: %v", err)
	}
	os.Remove(filepath.Join(root, "sys/kernel/perf_event_paranoid"))
	if err := Check(root); err == nil || !strings.Contains(err.Error(), "CONFIG_PERF_EVENTS") {
		t.Errorf("no perf: %v", err)
	}
}

// Run as nobody (no capability, perf_event_paranoid above 0), the profiler
// says what is missing and opens nothing.
func TestDeniedAsNobody(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to become nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	b, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if strings.TrimSpace(string(b)) == "" || strings.TrimSpace(string(b))[0] == '-' || strings.TrimSpace(string(b)) == "0" {
		t.Skip("perf_event_paranoid allows everyone here")
	}
	if os.Getenv("CPUPROF_AS_NOBODY") == "1" {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
		exe, "-test.run=^TestDeniedHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "CPUPROF_AS_NOBODY=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "denied: CPU profile not available: sampling every CPU needs CAP_PERFMON") {
		t.Fatalf("as nobody, want the missing capability named:\n%s", out)
	}
}

// TestDeniedHelper is what TestDeniedAsNobody runs as nobody.
func TestDeniedHelper(t *testing.T) {
	if os.Getenv("CPUPROF_AS_NOBODY") != "1" {
		t.Skip("run by TestDeniedAsNobody")
	}
	_, err := Start(Options{Keep: func(int) bool { return true }})
	var u *Unavailable
	if !errors.As(err, &u) {
		t.Fatalf("as nobody, Start: %v", err)
	}
	t.Logf("denied: %v", err)
}

// TestJunkAddressesDoNotRereadMaps: an address in no mapping asks for the
// process's maps again (code mapped since the last reading), but past a
// function built without frame pointers the kernel's walk reports words
// that are no address at all. Re-reading a 1,000-thread job's maps for each
// of those every 200 ms made most of the profile's cost; the maps are read
// again only when the address space changed size (statm).
func TestJunkAddressesDoNotRereadMaps(t *testing.T) {
	proc := t.TempDir()
	dir := filepath.Join(proc, "4242")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const exe = "00400000-00401000 r-xp 00000000 08:01 11 /opt/job/bin/job\n"
	const lib = "7f0000000000-7f0000001000 r-xp 00000000 08:01 12 /opt/job/lib/libcuda.so.1\n"
	write("maps", exe)
	write("statm", "1000 200 100 1 0 300 0\n")
	p := &Profiler{o: Options{Proc: proc}, procs: map[int]*procMaps{}, files: map[string]*elfFile{}}
	if _, ok := p.resolve(4242, 0x400010); !ok {
		t.Fatal("an address in the executable was not resolved")
	}
	pm := p.procs[4242]
	// The library is mapped in the file, but the address space's size has
	// not changed: a junk word (here, one in the library's range) does not
	// read the maps again.
	write("maps", exe+lib)
	pm.reread = time.Now().Add(-time.Second)
	if _, ok := p.resolve(4242, 0x7f0000000010); ok {
		t.Fatal("the maps were read again for an address while the address space kept its size")
	}
	if len(pm.maps) != 1 {
		t.Fatalf("maps re-read: %d mappings", len(pm.maps))
	}
	// Within 200 ms of a look, no look at all.
	write("statm", "1001 200 100 1 0 300 0\n")
	if _, ok := p.resolve(4242, 0x7f0000000010); ok {
		t.Fatal("the maps were read again within 200 ms of the last look")
	}
	// Later, the size has changed: a mapping was added, and it is found.
	pm.reread = time.Now().Add(-time.Second)
	if _, ok := p.resolve(4242, 0x7f0000000010); !ok {
		t.Fatal("a mapping added since (the address space grew) was not found")
	}
	if len(pm.maps) != 2 || pm.size != 1001 {
		t.Fatalf("after the re-read: %d mappings, size %d pages", len(pm.maps), pm.size)
	}
}
