// Package clitest runs a command under test as a user would: built once per
// test binary, run with its output, exit status and memory captured.
// Golden files are internal/golden's.
//
// A package whose tests run its binary calls Main from its TestMain (so the
// build is removed at the end) and Build wherever it needs the path.
package clitest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	mu     sync.Mutex
	dir    string
	builds = map[string]*build{}
)

type build struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// Build builds the main package pkg ("." for the package under test) the
// first time it is asked for and returns the binary's path; every later
// call, from any test of the binary, gets the same one. The binary lies in
// a directory every user may read, so a test that drops its privileges can
// run it.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	b := builds[pkg]
	if b == nil {
		b = &build{}
		builds[pkg] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		d, err := buildDir()
		if err != nil {
			b.err = err
			return
		}
		name := filepath.Base(pkg)
		if name == "." {
			wd, _ := os.Getwd()
			name = filepath.Base(wd)
		}
		b.path = filepath.Join(d, name)
		b.out, b.err = exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, b.err, b.out)
	}
	return b.path
}

func buildDir() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		return dir, nil
	}
	d, err := os.MkdirTemp("", "gpufeed-clitest-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(d, 0o755); err != nil {
		return "", err
	}
	dir = d
	return d, nil
}

// Main runs the tests of m and removes what Build built. Call it from
// TestMain: func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	mu.Unlock()
	return code
}

// Cmd is one run of a binary.
type Cmd struct {
	Args []string
	// Stdin is the standard input (nil: none).
	Stdin []byte
	// Env is added to the test's environment.
	Env []string
	// Dir is the working directory ("": the test's).
	Dir string
	// Timeout ends a run that hangs, failing the test (0: 5 minutes).
	Timeout time.Duration
	// SysProcAttr sets credentials, process groups...
	SysProcAttr *syscall.SysProcAttr
	// PeakRSS measures the run's own peak resident memory (Result.MaxRSS)
	// with GNU time, which forks it from a small process of its own. A
	// child forked from the test binary starts with the test binary's
	// memory counted as its own (the kernel keeps the largest resident
	// set of the process across exec, and a vfork'd child shares the
	// parent's), so its rusage says the test binary's peak when that is
	// larger: 97 MiB for a gpufeed that held 20 MiB, late in a full run.
	// Without /usr/bin/time the rusage is kept, and may overstate.
	PeakRSS bool
}

// Result is what a run gave.
type Result struct {
	Stdout, Stderr string
	// Code is the exit status (-1 when a signal ended it).
	Code int
	// MaxRSS is the peak resident memory in bytes.
	MaxRSS int64
}

// Run runs bin as c says and waits for it. Only a run that cannot start or
// does not end in time fails the test; any exit status is a result.
func Run(t testing.TB, bin string, c Cmd) Result {
	t.Helper()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	name, args := filepath.Base(bin), c.Args
	var rssFile string
	if c.PeakRSS {
		if _, err := os.Stat("/usr/bin/time"); err == nil {
			rssFile = filepath.Join(t.TempDir(), "maxrss")
			args = append([]string{"-q", "-f", "%M", "-o", rssFile, bin}, args...)
			bin = "/usr/bin/time"
		}
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	if c.Env != nil {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Dir, cmd.SysProcAttr = c.Dir, c.SysProcAttr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish in %v; stderr: %s", name, c.Args, timeout, stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s %v: %v", name, c.Args, err)
	}
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSS = ru.Maxrss << 10 // kilobytes on Linux
	}
	if rssFile != "" {
		b, err := os.ReadFile(rssFile)
		kb, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || perr != nil {
			t.Fatalf("%s %v: GNU time gave no peak resident memory (%v %v): %q", name, c.Args, err, perr, b)
		}
		r.MaxRSS = kb << 10
	}
	return r
}

// Started is a run of a binary that goes on while the test reads its
// standard output (diagnose -- COMMAND of a command that never ends by
// itself: the report comes, the command stays).
type Started struct {
	// Stdout is the binary's standard output, read as it comes.
	Stdout io.Reader
	cmd    *exec.Cmd
	stderr *lockedBuffer
	once   sync.Once
}

// Start starts bin as c says, in a process group of its own, and returns
// at once; the group (the binary and whatever it started) is killed when
// the test ends, or earlier by Stop. Only a run that cannot start fails
// the test.
func Start(t testing.TB, bin string, c Cmd) *Started {
	t.Helper()
	cmd := exec.Command(bin, c.Args...)
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	if c.Env != nil {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Dir = c.Dir
	cmd.SysProcAttr = c.SysProcAttr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	s := &Started{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = s.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s %v: %v", filepath.Base(bin), c.Args, err)
	}
	s.Stdout = out
	t.Cleanup(s.Stop)
	return s
}

// Stderr is what the binary wrote on its standard error so far.
func (s *Started) Stderr() string { return s.stderr.String() }

// Stop kills the run's process group and waits for the binary.
func (s *Started) Stop() {
	s.once.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Wait()
	})
}

// lockedBuffer is a buffer the process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
