package diagnose

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StopSignals end the window when they reach gpufeed: the report of what
// was seen is printed. With a launched command they are passed on to it,
// as timeout(1), tini and torchrun do: a scheduler stopping its job
// (scancel, a container runtime stopping its PID 1, kill, timeout) signals
// gpufeed alone, and the command must hear it to stop in time.
var StopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// PassOnSignals are passed on to a launched command and do not stop the
// window (Slurm's --signal warns a job with SIGUSR1 before its time
// limit; the job goes on).
var PassOnSignals = []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2}

// Stopped says which signal stopped the run and when.
type Stopped struct {
	Signal syscall.Signal
	At     time.Time
	// PassedOn says the signal was sent on to the launched command;
	// Skipped, when not, why.
	PassedOn bool
	Skipped  string
}

// signalName is "SIGTERM" for syscall.SIGTERM.
func signalName(s syscall.Signal) string { return unix.SignalName(s) }

// note is the report's line about the stop.
func (s *Stopped) note(start time.Time, launched bool) string {
	when := s.At.UTC().Format("15:04:05 MST")
	if !start.IsZero() && s.At.After(start) {
		when = fmt.Sprintf("%.1f s into the window (%s)", s.At.Sub(start).Seconds(), when)
	}
	n := fmt.Sprintf("the run was stopped: %s reached gpufeed %s", signalName(s.Signal), when)
	switch {
	case !launched:
		return n + "; the report covers the window up to then"
	case s.PassedOn:
		return n + " and was passed on to the command"
	default:
		return n + "; " + s.Skipped
	}
}

// signalRelay passes the signals gpufeed receives on to a launched command
// until it ends, and remembers the first stop signal.
type signalRelay struct {
	mu      sync.Mutex
	stopped *Stopped
}

func (r *signalRelay) first() *Stopped {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped == nil {
		return nil
	}
	s := *r.stopped
	return &s
}

// run reads sigs until done closes: each signal is passed on to proc (nil:
// none, attached), and a stop signal calls stop once. os.Process.Signal
// never signals a pid reused after the command was reaped.
func (r *signalRelay) run(sigs <-chan os.Signal, proc *os.Process, done <-chan struct{}, stop func()) {
	for {
		var sig os.Signal
		select {
		case sig = <-sigs:
		case <-done:
			return
		}
		ss, ok := sig.(syscall.Signal)
		if !ok {
			continue
		}
		st := &Stopped{Signal: ss, At: time.Now()}
		if proc != nil {
			st.Skipped = terminalDelivered(ss, proc.Pid)
			st.PassedOn = st.Skipped == ""
		}
		// Remembered before it is passed on: the command may end at once,
		// and the report must know why.
		first := false
		if isStop(ss) {
			r.mu.Lock()
			if r.stopped == nil {
				r.stopped, first = st, true
			}
			r.mu.Unlock()
		}
		if st.PassedOn {
			if err := proc.Signal(ss); err != nil {
				r.mu.Lock()
				st.PassedOn, st.Skipped = false, "it could not be passed on to the command ("+err.Error()+")"
				r.mu.Unlock()
			}
		}
		if first {
			stop()
		}
	}
}

func isStop(s syscall.Signal) bool {
	for _, x := range StopSignals {
		if x == s {
			return true
		}
	}
	return false
}

// terminalDelivered says why a signal is not passed on to the command
// ("" when it is): a terminal sends SIGINT (Ctrl-C), SIGQUIT (Ctrl-\) and
// SIGHUP (hang-up) to its whole foreground process group, so when gpufeed
// and the command are both in it, the command got the signal from the
// terminal already, and passing it on would deliver it twice (a second
// KeyboardInterrupt in a Python job's clean-up). Go does not tell who sent
// a signal (no siginfo), so a SIGINT sent with kill to gpufeed alone while
// it runs in a terminal's foreground is not passed on either: SIGTERM is.
func terminalDelivered(sig syscall.Signal, pid int) string {
	if sig != syscall.SIGINT && sig != syscall.SIGQUIT && sig != syscall.SIGHUP {
		return ""
	}
	fg, ok := foregroundGroup()
	if !ok || fg != syscall.Getpgrp() {
		return ""
	}
	if cg, err := syscall.Getpgid(pid); err != nil || cg != fg {
		return ""
	}
	return "it was not passed on: the command is in the terminal's foreground process group with gpufeed, and the terminal sent it there too"
}

// foregroundGroup is the foreground process group of gpufeed's controlling
// terminal (tpgid, field 8 of /proc/self/stat); false without a terminal.
func foregroundGroup() (int, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:]) // state ppid pgrp session tty_nr tpgid
	if len(f) < 6 {
		return 0, false
	}
	tpgid, err := strconv.Atoi(string(f[5]))
	if err != nil || tpgid <= 0 {
		return 0, false
	}
	return tpgid, true
}
