package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Task is what a pid a user names (diagnose --pid, check --pid) turns out to
// be: a process, a kernel thread, or a zombie. It is read once, from stat
// and the task list, not on the sampler's hot path.
type Task struct {
	PID, PPID int
	Comm      string
	State     byte
	// KernelThread: PF_KTHREAD in stat's flags. A kernel thread runs only
	// in the kernel: no program, no memory of its own, no GPU work.
	KernelThread bool
	// Zombie: every thread of the process has exited and its parent has not
	// reaped it (collected its exit status with wait). A process whose main
	// thread alone exited while other threads run is not a zombie.
	Zombie bool
	// ExitCode and ExitSignal are what the parent will collect from a
	// zombie (stat field 52, in waitpid's form): ExitSignal is 0 for an
	// exit. HasExit is false on kernels before 3.5, which lack the field.
	ExitCode, ExitSignal int
	HasExit              bool
	// UTime and STime are clock ticks of CPU time (a zombie's whole life).
	UTime, STime uint64
	// StartTime is when the process started, in clock ticks since boot:
	// with the pid, the process's identity (a reused pid starts later).
	StartTime uint64
}

// pfKthread is PF_KTHREAD from include/linux/sched.h.
const pfKthread = 0x00200000

// Describe reads what pid is.
func (fs FS) Describe(pid int) (Task, error) {
	path := fs.PidPath(pid, "stat")
	b, err := readCapped(path, PrivProcMount, capSmallFile)
	if err != nil {
		return Task{}, err
	}
	t, err := parseTask(path, b)
	if err != nil {
		return Task{}, err
	}
	t.PID = pid
	if t.State == 'Z' || t.State == 'X' {
		t.Zombie = fs.allThreadsExited(pid)
	}
	return t, nil
}

// parseTask reads the stat fields Describe needs. Fields are numbered as
// in proc(5); fields[i] after the name is field i+3.
func parseTask(path string, b []byte) (Task, error) {
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return Task{}, &ParseError{File: path, Want: "PID (comm) STATE ..."}
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return Task{}, &ParseError{File: path, Offset: close + 1, Want: "at least 22 fields after the name"}
	}
	field := func(n int) uint64 {
		v, _ := strconv.ParseUint(f[n-3], 10, 64)
		return v
	}
	t := Task{Comm: s[open+1 : close], State: f[0][0], UTime: field(14), STime: field(15), StartTime: field(22)}
	t.PPID, _ = strconv.Atoi(f[1])
	t.KernelThread = field(9)&pfKthread != 0
	if len(f) >= 52-2 {
		st := int(field(52))
		t.HasExit = true
		if sig := st & 0x7f; sig != 0 && sig != 0x7f {
			t.ExitSignal = sig
		} else {
			t.ExitCode = (st >> 8) & 0xff
		}
	}
	return t, nil
}

// allThreadsExited reports whether every listed thread of pid is a zombie
// or dead (the main thread of a process whose other threads run shows Z).
func (fs FS) allThreadsExited(pid int) bool {
	ents, err := os.ReadDir(fs.PidPath(pid, "task"))
	if err != nil {
		return true
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := readCapped(fs.TaskPath(pid, tid, "stat"), PrivProcMount, capSmallFile)
		if err != nil {
			continue // exited since the listing
		}
		if t, err := parseTask("stat", b); err == nil && t.State != 'Z' && t.State != 'X' {
			return false
		}
	}
	return true
}

// StartTime reads when pid started (stat field 22, clock ticks since boot),
// to tell the process a timeline saw from a later one with the same pid.
func (fs FS) StartTime(pid int) (uint64, error) {
	path := fs.PidPath(pid, "stat")
	b, err := readCapped(path, PrivProcMount, capSmallFile)
	if err != nil {
		return 0, err
	}
	t, err := parseTask(path, b)
	return t.StartTime, err
}

// ShellStatus is a zombie's end as a shell reports it: its exit code, or
// 128 plus the signal that killed it.
func (t Task) ShellStatus() int {
	if t.ExitSignal != 0 {
		return 128 + t.ExitSignal
	}
	return t.ExitCode
}

// End says how a zombie ended: "exit status 3", "killed by SIGKILL (exit
// status 137)".
func (t Task) End() string {
	switch {
	case !t.HasExit:
		return "exit status unknown (this kernel does not show it)"
	case t.ExitSignal != 0:
		name := unix.SignalName(unix.Signal(t.ExitSignal))
		if name == "" {
			name = "signal " + strconv.Itoa(t.ExitSignal)
		}
		return fmt.Sprintf("killed by %s (exit status %d)", name, t.ShellStatus())
	}
	return fmt.Sprintf("exit status %d", t.ExitCode)
}

// KernelThreadError is the answer to a target that is a kernel thread.
func (t Task) KernelThreadError() error {
	return fmt.Errorf("pid %d (%s) is a kernel thread: it runs only inside the kernel, with no program, memory or GPU work of its own, "+
		"so there is nothing of a job in it to diagnose or check; point --pid at the training or inference process (ps -eo pid,args shows kernel threads in [brackets])",
		t.PID, t.Comm)
}

// ZombieNote says what a zombie target is and what is left to read of it.
// parent names the parent ("pid 4242 (torchrun)").
func (t Task) ZombieNote(parent string) string {
	return fmt.Sprintf("pid %d (%s) has exited (%s) and is a zombie: its parent, %s, has not reaped it (collected its exit status with wait). "+
		"Nothing of it runs or holds memory any more; what is left to read is how it ended, the CPU time it used (%.2f s) and the kernel log since it started. "+
		"If the parent should have reaped it, diagnose the parent: gpufeed diagnose --pid %d",
		t.PID, t.Comm, t.End(), parent, float64(t.UTime+t.STime)/100, t.PPID)
}

// Name is "pid N (comm)", or "pid N" when it cannot be read.
func (fs FS) Name(pid int) string {
	if b, err := readCapped(fs.PidPath(pid, "stat"), PrivProcMount, capSmallFile); err == nil {
		if t, err := parseTask("stat", b); err == nil {
			return fmt.Sprintf("pid %d (%s)", pid, t.Comm)
		}
	}
	return "pid " + strconv.Itoa(pid)
}
