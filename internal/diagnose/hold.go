package diagnose

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// A launched command is held at its first instruction while gpufeed gets
// ready to watch it (its eBPF programs, the CPU profile, the driver probes:
// a fraction of a second on an idle host, seconds on a loaded one), and let
// go just before the window's first reading. Without the hold, the
// command's start-up ran before the window: a server whose imports ended
// before the first reading was judged "nothing moved over the whole
// window", and a launcher's busy start judged idle once it ended inside a
// window that began late.
//
// The hold is the kernel's own: the child asks to be traced
// (PTRACE_TRACEME, SysProcAttr.Ptrace) and stops with SIGTRAP once its
// execve has succeeded, before the new program's first instruction; a
// PTRACE_DETACH without a signal lets it go. gpufeed reads or writes
// nothing of it through ptrace. Where tracing is refused (a seccomp
// profile that forbids ptrace, Yama's ptrace_scope 3), the command starts
// unheld and the report says how long it ran before the window.
//
// ptrace ties the tracee to the OS thread that started it: that thread is
// locked from the start to the release, which is why the release runs on
// the goroutine that started the command (sample.Config.Release is called
// from Sampler.Run, on the goroutine that calls diagnose.Run).

// hold is a launched command held at its first instruction.
type hold struct {
	pid      int
	started  time.Time
	held     bool   // tracing took: the command is stopped until release
	refused  string // why tracing was refused (unheld), or ""
	released bool
	ran      time.Duration // unheld: how long it ran before the window
}

// startHeld starts cmd stopped at its first instruction. Where tracing
// is refused, cmd is started again unheld (the refused child never ran
// the command: PTRACE_TRACEME comes before execve), and h.refused says
// why. An error is the command's own start failure.
func startHeld(cmd *exec.Cmd, again func() *exec.Cmd) (*exec.Cmd, *hold, error) {
	runtime.LockOSThread()
	attr := &syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		c := *cmd.SysProcAttr
		attr = &c
	}
	attr.Ptrace = true
	cmd.SysProcAttr = attr
	err := cmd.Start()
	if err != nil && tracingRefused(err) {
		runtime.UnlockOSThread()
		why := err.Error()
		cmd = again()
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		return cmd, &hold{pid: cmd.Process.Pid, started: time.Now(), refused: why}, nil
	}
	if err != nil {
		runtime.UnlockOSThread()
		return nil, nil, err
	}
	h := &hold{pid: cmd.Process.Pid, started: time.Now(), held: true}
	// The SIGTRAP stop after execve: PTRACE_DETACH needs the tracee
	// stopped. Only this stop is consumed here; the command's exit is
	// waited for by cmd.Wait (waitid for exits only).
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(h.pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || !ws.Stopped() {
			// Killed before its first instruction (SIGKILL from
			// elsewhere): nothing is held; its reaping is cmd.Wait's.
			h.held = false
			h.released = true
			runtime.UnlockOSThread()
			return cmd, h, nil
		}
		break
	}
	return cmd, h, nil
}

// tracingRefused says a start failed because the child could not ask to
// be traced (EPERM from PTRACE_TRACEME; ENOSYS where seccomp answers so).
func tracingRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOSYS)
}

// release lets a held command run (once; later calls do nothing). It
// must be called on the goroutine that started it.
func (h *hold) release() error {
	if h == nil || h.released {
		return nil
	}
	h.released = true
	if !h.held {
		h.ran = time.Since(h.started)
		return nil
	}
	defer runtime.UnlockOSThread()
	if err := syscall.PtraceDetach(h.pid); err != nil && err != syscall.ESRCH {
		// Still stopped and still traced by this thread: it would never
		// run, so it is killed rather than left hanging.
		syscall.Kill(h.pid, syscall.SIGKILL)
		return fmt.Errorf("the command could not be let go after gpufeed got ready to watch it (ptrace detach: %w): it was stopped", err)
	}
	return nil
}

// note is what the report says of a command that could not be held: how
// long it ran before the window's first reading, and why.
func (h *hold) note() string {
	if h == nil || h.held || h.refused == "" {
		return ""
	}
	return fmt.Sprintf("The command ran %s before the window's first reading: gpufeed could not hold it at its first instruction while it got ready to watch it (tracing its own child was refused: %s), so the start of its start-up is not in the window.",
		fmtSec(h.ran), h.refused)
}

func fmtSec(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
