package procfs

import (
	"runtime"
	"strconv"
)

// Syscall is what /proc/PID/task/TID/syscall says a task is doing.
type Syscall struct {
	// Running is true when the task is on a CPU ("running").
	Running bool
	// InSyscall is false for a task blocked outside a system call ("-1 sp pc":
	// a page fault, a stop).
	InSyscall bool
	Number    int
	// Name is the system call's name for Arch, "" when not in the table.
	Name string
	Args [6]uint64
}

// ReadSyscall reads the system call a thread is blocked in. The kernel
// requires PTRACE_MODE_ATTACH for this file, so it is the first thing hidden
// from an unprivileged observer.
func (fs FS) ReadSyscall(pid, tid int, arch string) (Syscall, error) {
	path := fs.TaskPath(pid, tid, "syscall")
	b, err := readCapped(path, PrivPtraceAttach, capSmallFile)
	if err != nil {
		return Syscall{}, err
	}
	return ParseSyscall(path, b, arch)
}

// ParseSyscall parses "NR a1 a2 a3 a4 a5 a6 sp pc", "-1 sp pc" or "running".
func ParseSyscall(file string, b []byte, arch string) (Syscall, error) {
	var s Syscall
	f, i := nextField(b, 0)
	if string(f) == "running" {
		s.Running = true
		return s, nil
	}
	nr, ok := parseInt(f)
	if !ok {
		return s, &ParseError{File: file, Offset: 0, Want: `"running" or a system call number`}
	}
	if nr < 0 {
		return s, nil
	}
	s.InSyscall = true
	s.Number = int(nr)
	s.Name = SyscallName(arch, s.Number)
	for k := 0; k < 6; k++ {
		var a []byte
		a, i = nextField(b, i)
		if len(a) < 3 || a[0] != '0' || a[1] != 'x' {
			return s, &ParseError{File: file, Offset: i - len(a), Want: "argument " + itoa(k+1) + " as 0x-prefixed hex"}
		}
		v, err := strconv.ParseUint(string(a[2:]), 16, 64)
		if err != nil {
			return s, &ParseError{File: file, Offset: i - len(a), Want: "argument " + itoa(k+1) + " as 0x-prefixed hex"}
		}
		s.Args[k] = v
	}
	return s, nil
}

// FDArg returns the file descriptor a blocking call waits on, for the calls
// whose first argument is one (read, recvmsg, accept, epoll_wait, ioctl...).
func (s Syscall) FDArg() (int, bool) {
	if !s.InSyscall {
		return 0, false
	}
	if fdFirstArg[s.Name] {
		return int(int32(s.Args[0])), true
	}
	return 0, false
}

// fdFirstArg lists the calls whose first argument is the descriptor waited on.
var fdFirstArg = map[string]bool{
	"read": true, "readv": true, "pread64": true, "preadv": true,
	"write": true, "writev": true, "pwrite64": true,
	"recvfrom": true, "recvmsg": true, "recvmmsg": true, "sendto": true, "sendmsg": true,
	"accept": true, "accept4": true, "connect": true,
	"epoll_wait": true, "epoll_pwait": true, "epoll_pwait2": true,
	"ioctl": true, "fsync": true, "fdatasync": true, "flock": true,
	"io_uring_enter": true, "sync_file_range": true, "fallocate": true,
}

// Timed says whether the call a thread is blocked in returns by itself
// after a time: a sleep (nanosleep, clock_nanosleep), or a wait given a
// timeout (futex, poll, select, epoll_wait, a signal or semaphore wait, an
// AIO wait). A thread woken over and over in a timed wait is a timer
// firing (a watchdog, a heartbeat, a polling loop), not work arriving. The
// timeout argument's position is the same on x86-64 and arm64.
func (s Syscall) Timed() bool {
	if !s.InSyscall {
		return false
	}
	switch s.Name {
	case "nanosleep", "clock_nanosleep":
		return true
	case "futex":
		// FUTEX_WAIT (0), FUTEX_LOCK_PI (6), FUTEX_WAIT_BITSET (9),
		// FUTEX_WAIT_REQUEUE_PI (11), FUTEX_LOCK_PI2 (13) take a timeout
		// pointer in the fourth argument (the private and clock flags are
		// masked off); other operations do not block.
		switch s.Args[1] &^ (futexPrivateFlag | futexClockRealtime) {
		case 0, 6, 9, 11, 13:
			return s.Args[3] != 0
		}
		return false
	case "futex_waitv", "epoll_pwait2", "semtimedop":
		return s.Args[3] != 0
	case "poll":
		return int32(s.Args[2]) >= 0 // milliseconds; -1 waits forever
	case "epoll_wait", "epoll_pwait":
		return int32(s.Args[3]) >= 0
	case "ppoll", "rt_sigtimedwait":
		return s.Args[2] != 0
	case "select", "pselect6", "io_getevents", "io_pgetevents", "recvmmsg":
		return s.Args[4] != 0
	}
	return false
}

const (
	futexPrivateFlag   = 128
	futexClockRealtime = 256
)

// HostArch is the architecture name the syscall tables use for this binary's
// host ("x86_64" or "arm64").
func HostArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	default:
		return runtime.GOARCH
	}
}

// SyscallName names syscall nr on arch ("x86_64", "arm64"), or "" when it
// is not one of the calls gpufeed knows (the number is still recorded).
func SyscallName(arch string, nr int) string {
	switch arch {
	case "x86_64", "amd64":
		return syscallsX8664[nr]
	case "arm64", "aarch64":
		return syscallsARM64[nr]
	}
	return ""
}
