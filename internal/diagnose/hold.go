package diagnose

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// A launched command is held before its execve while gpufeed gets ready to
// watch it (its eBPF programs, the CPU profile, the driver probes: 0.16 s
// on an idle host here, seconds on a loaded one), and let go just before the
// window's first reading. Without the hold, the command's start-up ran
// before the window: a server whose imports ended before the first reading
// was judged quiet over the whole window, and a launcher's busy start
// judged idle once it ended inside a window that began late.
//
// The hold is perf record's: the child is forked and waits on a pipe until
// the parent writes one byte, then execs the command in its own place
// (same pid). Go cannot run code between fork and exec, so the child is
// gpufeed's own binary (/proc/self/exe) started with holdArg0 as its
// argv[0]; this package's init recognises it and does nothing else. A
// second pipe, closed by the execve (close-on-exec), tells the parent the
// command is running, or carries the errno of an execve that failed. If
// gpufeed ends before it lets the command go (an error before the window,
// or killed), the first pipe reads end-of-file and the command is never
// run: nothing of it ran half-watched.

// gateExe is gpufeed's own binary, whatever its path (a test points it
// elsewhere to see the unheld start).
var gateExe = "/proc/self/exe"

// holdArg0 is the argv[0] of a held child, as ps shows it while it waits.
const holdArg0 = "gpufeed-hold"

// Exit statuses of a held child that did not become the command.
const (
	holdCancelled = 125 // gpufeed let it go without a byte: never run
)

func init() {
	if len(os.Args) > 2 && os.Args[0] == holdArg0 {
		os.Exit(holdAndExec(os.Args[1], os.Args[2:]))
	}
}

// holdAndExec is the held child: it waits for the byte on fd 3, then
// execs path with argv; on failure it writes the errno to fd 4.
func holdAndExec(path string, argv []string) int {
	goPipe, status := os.NewFile(3, "go"), os.NewFile(4, "status")
	var b [1]byte
	if n, _ := io.ReadFull(goPipe, b[:]); n != 1 {
		return holdCancelled
	}
	goPipe.Close()
	syscall.CloseOnExec(4)
	err := syscall.Exec(path, argv, os.Environ())
	errno, _ := err.(syscall.Errno)
	var e [4]byte
	binary.LittleEndian.PutUint32(e[:], uint32(errno))
	status.Write(e[:])
	if errno == syscall.ENOENT {
		return ExitNotFound
	}
	return ExitNotExecutable
}

// hold is a launched command held before its execve.
type hold struct {
	started  time.Time
	held     bool // the gate runs: the command waits for release
	unheld   string
	goPipe   *os.File // the parent's end: one byte lets it go, closing cancels
	status   *os.File
	released bool
	ran      time.Duration // unheld: how long it ran before the window
	path     string
}

// startHeld starts cmd (its standard input and outputs set, not started)
// held, and returns the process that runs it: the held child, or, where
// that cannot be started, cmd itself started unheld, saying why. Its Path
// is checked first, so a command that is not found or not executable is
// an error here, before anything is forked.
func startHeld(cmd *exec.Cmd) (*exec.Cmd, *hold, error) {
	if cmd.Err != nil {
		return nil, nil, cmd.Err
	}
	if err := checkExecutable(cmd.Path); err != nil {
		return nil, nil, err
	}
	gate, h, err := startGate(cmd)
	if err == nil {
		return gate, h, nil
	}
	// The held child only read cmd: it starts as it is.
	why := err.Error()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	return cmd, &hold{started: time.Now(), unheld: why}, nil
}

// checkExecutable is what execve would refuse before anything runs: no
// such file, a directory, no execute permission.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return &os.PathError{Op: "exec", Path: path, Err: syscall.EISDIR}
	}
	if syscall.Access(path, 1 /* X_OK */) != nil {
		return &os.PathError{Op: "exec", Path: path, Err: syscall.EACCES}
	}
	return nil
}

// startGate forks gpufeed's own binary as the held child of cmd.
func startGate(cmd *exec.Cmd) (*exec.Cmd, *hold, error) {
	goR, goW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		goR.Close()
		goW.Close()
		return nil, nil, err
	}
	gate := &exec.Cmd{Path: gateExe, Args: append([]string{holdArg0, cmd.Path}, cmd.Args...),
		Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr, ExtraFiles: []*os.File{goR, stW}}
	err = gate.Start()
	goR.Close()
	stW.Close()
	if err != nil {
		goW.Close()
		stR.Close()
		return nil, nil, fmt.Errorf("gpufeed could not start its own binary to hold the command: %w", err)
	}
	return gate, &hold{started: time.Now(), held: true, goPipe: goW, status: stR, path: cmd.Path}, nil
}

// release lets a held command run and waits (at most 5 s) until its
// execve has succeeded; once only. An execve that failed is a
// *StartError.
func (h *hold) release() error {
	if h == nil || h.released {
		return nil
	}
	h.released = true
	if !h.held {
		h.ran = time.Since(h.started)
		return nil
	}
	_, werr := h.goPipe.Write([]byte{1})
	h.goPipe.Close()
	defer h.status.Close()
	if werr != nil {
		return nil // the held child is gone: its end is cmd.Wait's to report
	}
	h.status.SetReadDeadline(time.Now().Add(5 * time.Second))
	var e [4]byte
	if n, _ := io.ReadFull(h.status, e[:]); n == 4 {
		errno := syscall.Errno(binary.LittleEndian.Uint32(e[:]))
		return startError(h.path, &os.PathError{Op: "exec", Path: h.path, Err: errno})
	}
	return nil
}

// cancel ends a command not yet let go without running it (an error
// before the window); an unheld one is killed. Either way cmd.Wait reaps
// it. A command already let go is left alone.
func (h *hold) cancel(p *os.Process) {
	if h == nil || h.released {
		return
	}
	h.released = true
	if h.held {
		h.goPipe.Close()
		h.status.Close()
		return
	}
	p.Kill()
}

// note is what the report says of a command that could not be held: how
// long it ran before the window's first reading, and why.
func (h *hold) note() string {
	if h == nil || h.held || h.unheld == "" {
		return ""
	}
	return fmt.Sprintf("The command ran %.1f s before the window's first reading: %s, so the start of its start-up is not in the window.", h.ran.Seconds(), h.unheld)
}
