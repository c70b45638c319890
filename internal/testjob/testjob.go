// Package testjob runs real jobs that really produce the situations gpufeed
// must recognise: a rank OOM-killed in a memory cgroup while its peers wait,
// copy-on-write growth in forked workers (and its absence with flat
// storage), a file-descriptor leak toward a low limit, a hang on a pipe, a
// hang on a futex, and GIL-bound threads; and, under Debian's python3 with
// python3-torch, a real DataLoader over a list or a numpy array and a real
// torch.distributed (gloo) job.
//
// The jobs are Python scripts (standard library only, but for the torch
// ones) embedded in this package; Start writes them to a temporary
// directory and runs one. Each script reports what it did as JSON lines on
// its standard output (pids, ranks, phases), which Await reads. Tests of any
// package use these to put the machine in a known state and check what
// gpufeed concludes. (The scenarios of gpufeed demo are internal/demo's.)
package testjob

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed py/*.py
var scripts embed.FS

// Script names one embedded job script.
type Script string

const (
	// Ranks is a three-rank job passing values around a ring of pipes; with
	// a memory cgroup (RanksOptions) one rank is OOM-killed and the others
	// block in read().
	Ranks Script = "ranks.py"
	// COW forks workers that walk a dataset held by the parent
	// (--storage objects|array, --start fork|spawn|forkserver).
	COW Script = "cow.py"
	// FDLeak opens files, sockets and pipes at a steady rate under a lowered
	// soft RLIMIT_NOFILE (--soft N --rate R).
	FDLeak Script = "fdleak.py"
	// PipeHang is two processes each blocked in read() on an empty pipe.
	PipeHang Script = "pipehang.py"
	// FutexHang is threads blocked on a lock held by a sleeping thread.
	FutexHang Script = "futexhang.py"
	// GILThreads is several threads running pure-Python loops.
	GILThreads Script = "gilthreads.py"

	// TorchDataLoader is a real torch DataLoader whose forked workers read a
	// dataset held as a Python list (--storage list: copy-on-write) or a
	// numpy array (--storage numpy: flat). Runs under TorchPython.
	TorchDataLoader Script = "torch_dataloader.py"
	// TorchRanks is a real torch.distributed job on the CPU (gloo): a plain
	// launcher runs its own command line once per rank (fork and exec, as
	// srun starts tasks) with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and
	// a free loopback MASTER_PORT; the ranks all_reduce in a loop, and with
	// --hang R rank R deadlocks on a lock while the others wait in
	// all_reduce. Runs under TorchPython.
	TorchRanks Script = "torch_ranks.py"
	// TorchPyTime is a small CPU training loop whose Python time has one
	// known home (--mode loader: the DataLoader's __next__; item: .item()
	// per value; optim: a per-parameter optimizer step; transforms:
	// torchvision transforms run by a DataLoader without workers;
	// batch-transforms: torchvision transforms on each batch in the loop,
	// the last two needing TorchVision).
	TorchPyTime Script = "torch_pytime.py"
)

// needsTorch says a workload imports torch.
func (w Script) needsTorch() bool { return w == TorchDataLoader || w == TorchRanks || w == TorchPyTime }

// DebianPython is Debian's own interpreter, the one python3-torch and
// python3-numpy install into (the python3 on PATH may be another, pyenv's).
const DebianPython = "/usr/bin/python3"

var torchCheck struct {
	once sync.Once
	err  error
}

// TorchPython returns Debian's python3 when it imports torch and numpy, or
// an ErrUnavailable error saying what is missing and how to install it
// (scripts/test.sh installs it when missing).
func TorchPython() (string, error) {
	torchCheck.once.Do(func() {
		if _, err := os.Stat(DebianPython); err != nil {
			torchCheck.err = fmt.Errorf("%w: %s not found (Debian's python3)", ErrUnavailable, DebianPython)
			return
		}
		out, err := exec.Command(DebianPython, "-c", "import torch, numpy, torch.distributed as d; assert d.is_available()").CombinedOutput()
		if err != nil {
			torchCheck.err = fmt.Errorf("%w: %s cannot import torch, numpy and torch.distributed (apt-get install python3-torch python3-numpy): %v: %s",
				ErrUnavailable, DebianPython, err, lastLine(out))
		}
	})
	if torchCheck.err != nil {
		return "", torchCheck.err
	}
	return DebianPython, nil
}

var visionCheck struct {
	once sync.Once
	err  error
}

// TorchVision says whether TorchPython also imports torchvision (Debian's
// python3-torchvision, which scripts/test.sh installs when missing), or
// returns an ErrUnavailable error saying how to install it.
func TorchVision() error {
	if _, err := TorchPython(); err != nil {
		return err
	}
	visionCheck.once.Do(func() {
		out, err := exec.Command(DebianPython, "-c", "import torchvision.transforms, torchvision.datasets").CombinedOutput()
		if err != nil {
			visionCheck.err = fmt.Errorf("%w: %s cannot import torchvision (apt-get install python3-torchvision): %v: %s",
				ErrUnavailable, DebianPython, err, lastLine(out))
		}
	})
	return visionCheck.err
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// ErrUnavailable is wrapped when a workload cannot run on this machine (no
// python3, not root, no cgroup v1 memory controller); tests skip on it.
var ErrUnavailable = errors.New("test job unavailable")

// Python returns the python3 interpreter to run workloads with.
func Python() (string, error) {
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", fmt.Errorf("%w: python3 not found on PATH", ErrUnavailable)
	}
	return p, nil
}

// Message is one JSON line a workload printed.
type Message struct {
	Event string `json:"event"`
	PID   int    `json:"pid"`
	// Fields holds the whole object, for fields specific to one event.
	Fields map[string]json.RawMessage `json:"-"`
}

// Int reads an integer field.
func (m Message) Int(key string) (int, bool) {
	var v int
	raw, ok := m.Fields[key]
	if !ok || json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	return v, true
}

// Ints reads a list of integers.
func (m Message) Ints(key string) []int {
	var v []int
	if raw, ok := m.Fields[key]; ok {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}

// IntMap reads an object of integers ({"0": 1234}).
func (m Message) IntMap(key string) map[string]int {
	var v map[string]int
	if raw, ok := m.Fields[key]; ok {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}

// Run is one running workload.
type Run struct {
	Cmd *exec.Cmd
	// PID is the workload's top process.
	PID int
	// Dir holds the scripts; it is removed by Stop.
	Dir string

	mu       sync.Mutex
	messages []Message
	notify   chan struct{}
	done     chan struct{}
	stderr   *tail
	stopOnce sync.Once
	stopErr  error
	cleanup  []func() error
}

// Start runs a workload with the given arguments and extra environment
// ("KEY=VALUE"). The workload runs in its own process group, so Stop ends
// it and every process it started.
func Start(ctx context.Context, w Script, env []string, args ...string) (*Run, error) {
	py, err := Python()
	if w.needsTorch() {
		py, err = TorchPython()
	}
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gpufeed-testjob-")
	if err != nil {
		return nil, err
	}
	if err := WriteScripts(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.CommandContext(ctx, py, append([]string{"-u", filepath.Join(dir, string(w))}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r := &Run{Cmd: cmd, Dir: dir, notify: make(chan struct{}, 1), done: make(chan struct{}), stderr: &tail{max: 4 << 10}}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", w, err)
	}
	r.PID = cmd.Process.Pid
	go r.read(out)
	return r, nil
}

// WriteScripts writes every workload's script into dir, for a test that
// runs one itself (under gpufeed diagnose -- CMD).
func WriteScripts(dir string) error {
	entries, err := scripts.ReadDir("py")
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := scripts.ReadFile("py/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (r *Run) read(out io.Reader) {
	defer close(r.done)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var m Message
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		_ = json.Unmarshal(sc.Bytes(), &m.Fields)
		r.mu.Lock()
		r.messages = append(r.messages, m)
		r.mu.Unlock()
		select {
		case r.notify <- struct{}{}:
		default:
		}
	}
}

// Await waits for the next message with this event name not yet returned
// by Await, or fails when the workload ends, the timeout passes or ctx ends.
func (r *Run) Await(ctx context.Context, event string, timeout time.Duration) (Message, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for i, m := range r.messages {
			if m.Event == event {
				r.messages = append(r.messages[:i:i], r.messages[i+1:]...)
				r.mu.Unlock()
				return m, nil
			}
		}
		r.mu.Unlock()
		select {
		case <-r.notify:
		case <-r.done:
			// drain what was read before the end
			r.mu.Lock()
			for i, m := range r.messages {
				if m.Event == event {
					r.messages = append(r.messages[:i:i], r.messages[i+1:]...)
					r.mu.Unlock()
					return m, nil
				}
			}
			r.mu.Unlock()
			return Message{}, fmt.Errorf("workload pid %d ended before %q; stderr: %s", r.PID, event, r.stderr.String())
		case <-deadline.C:
			return Message{}, fmt.Errorf("workload pid %d: no %q within %s; stderr: %s", r.PID, event, timeout, r.stderr.String())
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// OnStop registers a cleanup to run after the workload is stopped (a
// cgroup to remove).
func (r *Run) OnStop(f func() error) { r.cleanup = append(r.cleanup, f) }

// Stop kills the workload's process group, waits for it and removes its
// files; it is safe to call more than once.
func (r *Run) Stop() error {
	r.stopOnce.Do(func() {
		_ = syscall.Kill(-r.PID, syscall.SIGKILL)
		_ = r.Cmd.Wait()
		<-r.done
		var errs []error
		for i := len(r.cleanup) - 1; i >= 0; i-- {
			errs = append(errs, r.cleanup[i]())
		}
		errs = append(errs, os.RemoveAll(r.Dir))
		r.stopErr = errors.Join(errs...)
	})
	return r.stopErr
}

// tail keeps the last bytes written (a workload's stderr, for errors).
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
