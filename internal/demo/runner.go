package demo

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/python"
)

//go:embed py/*.py
var pyFiles embed.FS

// Options say how to start a scenario.
type Options struct {
	// Exe is the gpufeed binary, re-executed as Exe WorkloadArgs... NAME for
	// Go workloads and neighbours, and as Exe simdev for the device.
	Exe          string
	WorkloadArgs []string
	// Python is the interpreter; empty: python3 from PATH, resolved to the
	// real executable (sys.executable), so no wrapper (a pyenv shim) joins
	// the observed tree.
	Python string
	// Lifetime bounds how long the workload lives if nobody stops it
	// (default 2 minutes).
	Lifetime time.Duration
	// TempDir is where the run's directory goes (default os.TempDir()).
	TempDir string
	// ReadyTimeout bounds the workload's setup (default 60 s).
	ReadyTimeout time.Duration
	// Launch returns as soon as the workload is started, without waiting
	// for it to be ready, so that its observation covers its start-up, as
	// diagnose -- COMMAND does (default: once it is set up and working, as
	// diagnose --pid on a running job).
	Launch bool
	// WithoutNeighbours runs a scenario that has neighbours (noisy-neighbour)
	// without them: the same job, pinned to the same CPU, alone. It is the
	// baseline that gpufeed compare sets the scenario beside.
	WithoutNeighbours bool
}

// Run is a started scenario.
type Run struct {
	Scenario Scenario
	// Socket is the simulated device's socket; PID the workload process,
	// the target to diagnose; Command its command line.
	Socket  string
	PID     int
	Command []string
	// Notes say how the scenario was set up on this machine (a throttled
	// cgroup, the CPU the launch thread and its neighbours share).
	Notes []string

	dir        string
	simdev     *exec.Cmd
	simdevDone chan struct{}
	workload   *exec.Cmd
	neighbours []*exec.Cmd
	stderr     *lockedBuffer
	cleanups   []func()
	waited     chan struct{}
	stopOnce   sync.Once
}

// Start prepares and starts a scenario: its own simulated device, its
// files, the neighbours it needs and the workload, and returns once the
// workload says it is ready (set up and working).
func Start(ctx context.Context, sc Scenario, o Options) (r *Run, err error) {
	if o.Lifetime <= 0 {
		o.Lifetime = 2 * time.Minute
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	r = &Run{Scenario: sc, stderr: &lockedBuffer{}, waited: make(chan struct{})}
	defer func() {
		if err != nil {
			r.Stop()
			r = nil
		}
	}()
	if r.dir, err = os.MkdirTemp(o.TempDir, "gpufeed-demo-"); err != nil {
		return r, err
	}
	r.Socket = filepath.Join(r.dir, "gpu.sock")
	if err = r.startSimdev(o.Exe); err != nil {
		return r, err
	}
	allowUnlimitedMemlock()

	env := append(os.Environ(),
		"GPUFEED_SIMDEV="+r.Socket,
		"GPUFEED_DEMO_SECONDS="+strconv.Itoa(int(o.Lifetime.Seconds())),
		"GPUFEED_DEMO_READY_FD=3",
	)
	if sc.Sync != "" {
		env = append(env, "GPUFEED_SIMDEV_SYNC="+sc.Sync) // the last one counts
	}
	if m := syncMode(env); m != "" {
		say := map[string]string{"spin": "spin", "yield": "yield the CPU in a loop", "block": "block (sleep until done)",
			"auto": "follow CUDA's default (spin while contexts < CPUs)"}[m]
		if say == "" {
			say = "are set to an unknown mode"
		}
		r.Notes = append(r.Notes, "the workload's CUDA waits "+say+" (GPUFEED_SIMDEV_SYNC="+m+")")
	}
	var args []string
	if sc.Python != "" {
		pyDir := filepath.Join(r.dir, "py")
		if err = writePython(pyDir); err != nil {
			return r, err
		}
		py := o.Python
		if py == "" {
			if py, err = findPython(ctx); err != nil {
				return r, err
			}
		}
		env = append(env, "PYTHONPATH="+pyDir+pathListSep(os.Getenv("PYTHONPATH")), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
		args = []string{py, filepath.Join(pyDir, sc.Python)}
	} else {
		args = append(append([]string{o.Exe}, o.WorkloadArgs...), sc.Go)
	}
	if sc.Neighbours > 0 {
		cpu := lastAllowedCPU()
		env = append(env, "GPUFEED_DEMO_CPU="+strconv.Itoa(cpu))
		n := sc.Neighbours
		if o.WithoutNeighbours {
			n = 0
			r.Notes = append(r.Notes, fmt.Sprintf("without its neighbours: the launch thread is pinned to cpu%d alone", cpu))
		}
		for i := 0; i < n; i++ {
			nb := exec.Command(o.Exe, append(append([]string{}, o.WorkloadArgs...), "hog", "--cpu", strconv.Itoa(cpu))...)
			nb.Env = append(os.Environ(), "GPUFEED_DEMO_SECONDS="+strconv.Itoa(int(o.Lifetime.Seconds())))
			nb.Stderr = r.stderr
			if err = nb.Start(); err != nil {
				return r, fmt.Errorf("starting a neighbour: %w", err)
			}
			r.neighbours = append(r.neighbours, nb)
		}
		if n > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("the launch thread and %d CPU hogs outside the job are pinned to cpu%d", n, cpu))
		}
	}
	if sc.Storage {
		extra, note, cleanup, serr := prepareStorage(r.dir)
		if serr != nil {
			return r, serr
		}
		env = append(env, extra...)
		r.Notes = append(r.Notes, note)
		if cleanup != nil {
			r.cleanups = append(r.cleanups, cleanup)
		}
	}

	readyR, readyW, err := os.Pipe()
	if err != nil {
		return r, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Stdout = io.Discard
	cmd.Stderr = r.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its workers die with it
	if err = cmd.Start(); err != nil {
		readyW.Close()
		return r, fmt.Errorf("starting the %s workload: %w", sc.Name, err)
	}
	readyW.Close()
	r.workload, r.PID, r.Command = cmd, cmd.Process.Pid, args
	go func() {
		_ = cmd.Wait()
		close(r.waited)
	}()

	line := make(chan string, 1)
	go func() {
		// Read the line even when nobody waits for it (Launch): a workload
		// writing "ready" into a pipe nobody reads would fail.
		s, _ := bufio.NewReader(readyR).ReadString('\n')
		readyR.Close()
		line <- s
	}()
	if o.Launch {
		return r, nil
	}
	t := time.NewTimer(o.ReadyTimeout)
	defer t.Stop()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "ready" {
			<-r.waited
			return r, fmt.Errorf("the %s workload ended before it was ready: %s", sc.Name, r.stderrText())
		}
	case <-t.C:
		return r, fmt.Errorf("the %s workload was not ready after %v: %s", sc.Name, o.ReadyTimeout, r.stderrText())
	case <-ctx.Done():
		return r, ctx.Err()
	}
	return r, nil
}

// Stop ends the workload (its whole process group), the neighbours and
// the simulated device, and removes the run's files.
func (r *Run) Stop() {
	r.stopOnce.Do(func() {
		if r.workload != nil && r.workload.Process != nil {
			_ = syscall.Kill(-r.workload.Process.Pid, syscall.SIGKILL)
			<-r.waited
		}
		for _, nb := range r.neighbours {
			_ = nb.Process.Kill()
			_ = nb.Wait()
		}
		if r.simdev != nil {
			_ = r.simdev.Process.Kill()
			<-r.simdevDone
		}
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			r.cleanups[i]()
		}
		if r.dir != "" {
			_ = os.RemoveAll(r.dir)
		}
	})
}

// simdevReadyTimeout bounds how long the simulated device may take to
// listen; it starts in milliseconds.
const simdevReadyTimeout = 10 * time.Second

// startSimdev starts the scenario's simulated device as its own process
// (gpufeed simdev), so that what the diagnosing process costs, which the
// report shows as the observer's cost, is the observer's alone: serving the
// workload's launches is the device's work, not gpufeed's.
func (r *Run) startSimdev(exe string) error {
	var out lockedBuffer
	cmd := exec.Command(exe, "simdev", "--socket", r.Socket)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the simulated device: %w", err)
	}
	r.simdev, r.simdevDone = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(r.simdevDone)
	}()
	deadline := time.Now().Add(simdevReadyTimeout)
	for {
		if src, err := sim.Dial(r.Socket); err == nil {
			src.Close()
			return nil
		}
		select {
		case <-r.simdevDone:
			return fmt.Errorf("the simulated device ended at start: %s", strings.TrimSpace(out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the simulated device did not listen on %s within %v: %s", r.Socket, simdevReadyTimeout, strings.TrimSpace(out.String()))
		}
	}
}

// Stderr is what the workload and neighbours wrote to stderr.
func (r *Run) Stderr() string { return r.stderrText() }

func (r *Run) stderrText() string {
	s := strings.TrimSpace(r.stderr.String())
	if s == "" {
		return "(nothing on stderr)"
	}
	return s
}

func writePython(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, python.SimdevClientName), python.SimdevClient, 0o644); err != nil {
		return err
	}
	entries, err := pyFiles.ReadDir("py")
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := pyFiles.ReadFile("py/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// findPython resolves python3 on PATH to the interpreter itself.
func findPython(ctx context.Context) (string, error) {
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("python3 not found on PATH: the Python scenarios need a python3 (standard library only)")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("%s does not run: %w", p, err)
	}
	if exe := strings.TrimSpace(string(out)); exe != "" {
		return exe, nil
	}
	return p, nil
}

// syncMode is the GPUFEED_SIMDEV_SYNC an environment gives its process
// (the last entry counts, as exec's), or "".
func syncMode(env []string) string {
	m := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "GPUFEED_SIMDEV_SYNC="); ok {
			m = v
		}
	}
	return m
}

func pathListSep(rest string) string {
	if rest == "" {
		return ""
	}
	return string(os.PathListSeparator) + rest
}

// lockedBuffer collects stderr from several processes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil // enough to say what went wrong
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
