package procfs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"unsafe"
)

// Caps on one-off reads. Pseudo-files report a size of 0 (or a lie) in stat,
// so every read is bounded by what the file can legitimately hold; the
// buffer grows from 4 KiB as needed, so a cap costs nothing below it.
const (
	capSmallFile = 4 << 10  // stat, statm, schedstat, io, wchan, syscall
	capStatus    = 64 << 10 // status: ~1.5 KiB, more with long cpu lists on big hosts
	capText      = 64 << 10 // limits, one-value sysfs and procfs files, driver information
	capEnviron   = 1 << 20  // environ: ARG_MAX-bounded, usually a few KiB
	capCmdline   = 1 << 20
	// DefaultMaxRead caps a table that grows with the machine or the process
	// (interrupts of a host with thousands of CPUs, numa_maps of a 1 TB
	// process): what was read counts, and the reader says it was cut.
	DefaultMaxRead = 8 << 20
)

// readCapped reads a file of a process or thread (ENOENT: it vanished).
func readCapped(path, priv string, limit int) ([]byte, error) {
	return readFile(path, priv, ErrVanished, limit)
}

// readHost reads a file of the machine (ENOENT: this kernel or device has
// none).
func readHost(path string, limit int) ([]byte, error) {
	return readFile(path, PrivRoot, ErrAbsent, limit)
}

// readFile opens path, reads at most limit bytes and closes it; it is the
// one capped reader of this package. A file that fills the cap is cut: the
// bytes read are returned with ErrTooLarge wrapped, so callers choose
// whether a prefix is good enough. missing says what ENOENT means.
func readFile(path, priv string, missing error, limit int) ([]byte, error) {
	return readFileVia(path, priv, missing, limit, false)
}

// readFileRaw is readFile with raw system calls, for the files read every
// tick or every slow tick that the kernel formats from counters in memory
// and never waits on I/O for (a cgroup's counters and limits, statm,
// status, io): a scheduled system call wakes the Go runtime's monitor
// thread out of its deep sleep, to poll every 20 µs while the tick runs,
// and its wake-ups are a tenth of gpufeed's CPU at 1,000 threads in this
// project's virtual machine (docs/PERFORMANCE.md). Files that read another
// process's memory (cmdline, environ) or walk its mappings are read with
// scheduled calls: they can wait on a page-in.
func readFileRaw(path, priv string, missing error, limit int) ([]byte, error) {
	return readFileVia(path, priv, missing, limit, true)
}

func readFileVia(path, priv string, missing error, limit int, raw bool) ([]byte, error) {
	var fd int
	var err error
	if raw {
		fd, err = openRaw(path)
	} else {
		fd, err = openRetry(path)
	}
	if err != nil {
		return nil, classify(path, priv, missing, err)
	}
	if raw {
		defer syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0)
	} else {
		defer syscall.Close(fd)
	}
	buf := make([]byte, 0, min(limit, 4096))
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= limit {
				return buf, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
			}
			nb := make([]byte, len(buf), min(2*cap(buf), limit))
			copy(nb, buf)
			buf = nb
		}
		var n int
		if raw {
			n, err = readRaw(fd, buf[len(buf):cap(buf)])
		} else {
			n, err = syscall.Read(fd, buf[len(buf):cap(buf)])
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, classify(path, priv, missing, err)
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// openRaw opens path read-only with a raw system call, retrying EINTR.
func openRaw(path string) (int, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	for {
		fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(p)),
			uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC), 0, 0, 0)
		if e == 0 {
			return int(fd), nil
		}
		if e != syscall.EINTR {
			return -1, e
		}
	}
}

// atFDCWD is AT_FDCWD (-100): a path relative to the working directory.
var atFDCWD = ^uintptr(99)

func readRaw(fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// readString reads a small sysfs or procfs value file of the machine, trimmed.
func readString(path string) (string, error) {
	data, err := readHost(path, capText)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// readPrefix is readFile for files whose first limit bytes are enough:
// truncated says the file was cut at the cap, and is no error.
func readPrefix(path, priv string, missing error, limit int) (data []byte, truncated bool, err error) {
	data, err = readFile(path, priv, missing, limit)
	if errors.Is(err, ErrTooLarge) {
		return data, true, nil
	}
	return data, false, err
}
