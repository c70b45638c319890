package sample

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The fixture was captured by scripts/capture-proc-fixture.py from its
// built-in workload: a trainer-like process (pid 26627, 37 threads listed,
// one of which, tid 26718, exited between listing and copying) and a forked
// pt_data_worker child (pid 26719).
const (
	fixtureRoot     = "../../testdata/proc/trainer"
	fixturePID      = 26627
	fixtureWorker   = 26719
	fixtureVanished = 26718
	fixtureCanary   = "GPUFEED_FIXTURE_CANARY"
)

// copyTree copies the fixture so a test may change permissions on it.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case fi.IsDir():
			return os.MkdirAll(target, 0o755)
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func sampleFixture(t *testing.T, root string) *timeline.Timeline {
	t.Helper()
	fs, err := procfs.NewFS(root, filepath.Join(root, "no-sys"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{FS: fs, PID: fixturePID,
		Interval: 50 * time.Millisecond, Duration: 120 * time.Millisecond, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestFixtureTree(t *testing.T) {
	tl := sampleFixture(t, fixtureRoot)
	if len(tl.Procs) != 2 {
		t.Fatalf("want the trainer and its worker, got %d processes", len(tl.Procs))
	}
	if tl.Counts.VanishedThreads != 1 {
		t.Errorf("the thread that exited mid-capture must be skipped and counted once, counts %+v", tl.Counts)
	}
	if len(tl.Threads) != 37 {
		t.Errorf("want 36 readable trainer threads + 1 worker thread, got %d", len(tl.Threads))
	}
	for k := range tl.Threads {
		if k.TID == fixtureVanished {
			t.Errorf("vanished thread %d was recorded", k.TID)
		}
	}
	byPID := map[int]*timeline.ProcInfo{}
	for _, p := range tl.Procs {
		byPID[p.Key.PID] = p
	}
	trainer, worker := byPID[fixturePID], byPID[fixtureWorker]
	if trainer == nil || worker == nil {
		t.Fatalf("missing a process: %v", byPID)
	}
	if trainer.Role != RoleRank || worker.Role != RoleDataLoaderWorker {
		t.Errorf("roles: trainer %q (RANK=0 in its environment), worker %q", trainer.Role, worker.Role)
	}
	if trainer.Env["RANK"] != "0" || trainer.Env["OMP_NUM_THREADS"] != "4" {
		t.Errorf("allowlisted env not read: %v", trainer.Env)
	}
	if _, ok := trainer.Env[fixtureCanary]; ok {
		t.Errorf("a variable outside the allowlist was kept: %v", trainer.Env)
	}
	if trainer.NoFileSoft == nil || *trainer.NoFileSoft == 0 || trainer.CPUsAllowed == "" {
		t.Errorf("limits/status not read: %+v", trainer)
	}
	// Roles by name; the trainer's intra-op pool threads share the main
	// thread's name (pt_main_thread), so that name is judged thread by
	// thread: the main one (tid == pid) is "main", every other one is
	// "intra-op".
	roles := map[string]string{}
	for _, th := range tl.Threads {
		if th.Comm == "pt_main_thread" {
			want := ThreadIntraOp
			if th.Key.TID == th.PID {
				want = ThreadMain
			}
			if th.Role != want {
				t.Errorf("thread %d pt_main_thread: role %q, want %q", th.Key.TID, th.Role, want)
			}
			continue
		}
		roles[th.Comm] = th.Role
	}
	for comm, want := range map[string]string{"pt_autograd_0": ThreadAutograd, "pt_data_pin": ThreadPin,
		"pt_nccl_watchdg": ThreadNCCL, "NCCL Service 0": ThreadNCCL, "pt_data_worker": ThreadMain} {
		if roles[comm] != want {
			t.Errorf("thread %q: role %q, want %q", comm, roles[comm], want)
		}
	}
	last := tl.Ticks[len(tl.Ticks)-1]
	var pin, spin *timeline.ThreadSample
	for i := range last.Threads {
		switch tl.Threads[threadKeyAt(tl, last.Threads[i].TID)].Comm {
		case "pt_data_pin":
			pin = &last.Threads[i]
		case "pt_spin":
			spin = &last.Threads[i]
		}
	}
	if pin == nil || pin.Blocked == nil || pin.Blocked.Syscall != "read" || !strings.HasPrefix(pin.Blocked.On, "pipe:[") || pin.Blocked.Wchan != "anon_pipe_read" {
		t.Errorf("pin-memory thread blocked on a pipe read: got %+v", pin)
	}
	if spin == nil || spin.State != 'R' || spin.Blocked != nil {
		t.Errorf("spinning thread: got %+v", spin)
	}
	var fds *int
	for _, ps := range last.Procs {
		if ps.PID == fixturePID {
			fds = ps.FDs
			if ps.PSSBytes == nil || ps.IO == nil || ps.RSSPages == 0 {
				t.Errorf("trainer sample incomplete: %+v", ps)
			}
		}
	}
	if fds == nil || *fds < 5 {
		t.Errorf("fd count: %v", fds)
	}
	if last.Host == nil || len(last.Host.CPUs) == 0 || last.Host.PSI == nil || last.Host.Mem == nil {
		t.Errorf("host sample incomplete: %+v", last.Host)
	}
}

func threadKeyAt(tl *timeline.Timeline, tid int) timeline.ThreadKey {
	for k := range tl.Threads {
		if k.TID == tid {
			return k
		}
	}
	return timeline.ThreadKey{}
}

// deniedEnvHelper is set when this test binary was re-executed as an
// unprivileged user to sample a fixture whose environ it may not read.
const deniedEnvHelper = "GPUFEED_TEST_DENIED_ENV_ROOT"

func TestFixtureDeniedEnviron(t *testing.T) {
	if root := os.Getenv(deniedEnvHelper); root != "" {
		// Child: sample and report the worker's facts on stdout.
		tl := sampleFixture(t, root)
		for _, p := range tl.Procs {
			if p.Key.PID == fixtureWorker {
				json.NewEncoder(os.Stdout).Encode(p)
			}
		}
		return
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "proc")
	copyTree(t, fixtureRoot, root)
	env := filepath.Join(root, "26719", "environ")
	if err := os.Chmod(env, 0); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if os.Geteuid() != 0 {
		// Mode 0 denies its owner too (without CAP_DAC_OVERRIDE).
		tl := sampleFixture(t, root)
		for _, p := range tl.Procs {
			if p.Key.PID == fixtureWorker {
				out, _ = json.Marshal(p)
			}
		}
	} else {
		// Root reads anything: re-run this test as nobody, over a world-readable copy.
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "sample.test")
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(bin, "-test.run=^TestFixtureDeniedEnviron$", "-test.count=1")
		cmd.Env = append(os.Environ(), deniedEnvHelper+"="+root, "GOCOVERDIR="+dir)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err = cmd.Output()
		if err != nil {
			t.Fatalf("helper as nobody: %v\n%s", err, out)
		}
	}
	var p timeline.ProcInfo
	line := out
	if i := strings.IndexByte(string(out), '\n'); i >= 0 {
		line = out[:i]
	}
	if err := json.Unmarshal(line, &p); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	if p.Env != nil {
		t.Errorf("denied environ read anyway: %v", p.Env)
	}
	if got := p.NotVisible["env"]; got != "not visible: "+procfs.PrivPtraceRead {
		t.Errorf("NotVisible[env] = %q", got)
	}
}

// Past the descriptor budget threads are read by opening their files each
// tick: every thread is still sampled, and nothing is reported as an error.
func TestDescriptorBudgetFallsBackToOneShotReads(t *testing.T) {
	fs, err := procfs.NewFS(fixtureRoot, filepath.Join(fixtureRoot, "no-sys"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{FS: fs, PID: fixturePID,
		Interval: 50 * time.Millisecond, Duration: 120 * time.Millisecond, MaxKeptFiles: 10})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Threads) != 37 || tl.Counts.ReadErrors != 0 || tl.Counts.VanishedThreads != 1 {
		t.Errorf("threads %d, counts %+v", len(tl.Threads), tl.Counts)
	}
	last := tl.Ticks[len(tl.Ticks)-1]
	if len(last.Threads) != 37 {
		t.Errorf("last tick sampled %d threads", len(last.Threads))
	}
	if s.kept > 10 {
		t.Errorf("kept %d descriptors, budget 10", s.kept)
	}
}

// TestWaitOfAThreadThatWokeIsNotHalfRead: a thread whose stat said
// asleep, but whose system call file says "running" when its wait is read
// (it woke between the two reads), gets no wait in its samples. Read
// half, its wait channel without the call, a poll loop's 10 ms epoll_wait
// lost its timeout, and its timer wake-ups read as work arriving: a hung
// job's window was judged not stalled. Its neighbour, asleep in a pipe
// read, is read whole.
func TestWaitOfAThreadThatWokeIsNotHalfRead(t *testing.T) {
	root := t.TempDir()
	copyTree(t, fixtureRoot, root)
	const woke = 26656 // asleep in nanosleep at its stat reading
	task := filepath.Join(root, strconv.Itoa(fixturePID), "task", strconv.Itoa(woke))
	if err := os.WriteFile(filepath.Join(task, "syscall"), []byte("running\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tl := sampleFixture(t, root)
	read := 0
	for _, tk := range tl.Ticks {
		for _, s := range tk.Threads {
			switch {
			case s.TID == woke && s.Blocked != nil:
				t.Errorf("tick %d: the thread that woke has a wait %+v; want none", tk.T, *s.Blocked)
			case s.TID == 26655 && s.Blocked != nil:
				if s.Blocked.Syscall != "read" || s.Blocked.Wchan != "anon_pipe_read" {
					t.Errorf("the pipe reader's wait: %+v", *s.Blocked)
				}
				read++
			}
		}
	}
	if read == 0 {
		t.Error("the pipe reader's wait was never read")
	}
}
