package procfs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
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
	fd, err := openRetry(path)
	if err != nil {
		return nil, classify(path, priv, missing, err)
	}
	defer syscall.Close(fd)
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
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
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
