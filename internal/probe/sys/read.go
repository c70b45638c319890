package sys

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// DefaultMaxRead caps a read of one pseudo-file. Pseudo-files report a size
// of 0 or 4096 whatever they hold, so reads never trust stat; the cap keeps a
// hostile or enormous file (numa_maps of a 1 TB process) from eating memory.
const DefaultMaxRead = 8 << 20

// FS is a view of one machine's /proc and /sys.
type FS struct {
	// Proc and Sys are the roots of procfs and sysfs ("/proc", "/sys", or
	// "/host/proc" in a container with the host mounted at /host).
	Proc string
	Sys  string
}

// New returns an FS rooted at procRoot and sysRoot; empty strings mean the
// defaults /proc and /sys.
func New(procRoot, sysRoot string) FS {
	if procRoot == "" {
		procRoot = "/proc"
	}
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	return FS{Proc: procRoot, Sys: sysRoot}
}

// ProcPath joins elements under the proc root.
func (f FS) ProcPath(elem ...string) string {
	return filepath.Join(append([]string{f.Proc}, elem...)...)
}

// SysPath joins elements under the sys root.
func (f FS) SysPath(elem ...string) string {
	return filepath.Join(append([]string{f.Sys}, elem...)...)
}

// PIDDir names a process directory: "self" for pid 0, else the number.
func PIDDir(pid int) string {
	if pid <= 0 {
		return "self"
	}
	return fmt.Sprint(pid)
}

// ReadCapped reads at most max bytes of path. truncated is true when the file
// held more; callers parse what they got and say it was cut.
func ReadCapped(path string, max int) (data []byte, truncated bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, false, &fs.PathError{Op: "read", Path: path, Err: unwrapPathErr(err)}
	}
	if len(data) > max {
		return data[:max], true, nil
	}
	return data, false, nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readString reads a small sysfs or procfs value file, trimmed.
func readString(path string) (string, error) {
	data, _, err := ReadCapped(path, 64<<10)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// IsAbsent reports whether err means the file or process does not exist
// (ENOENT, or ESRCH for a process that vanished between listing and reading).
func IsAbsent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOTDIR)
}

// IsDenied reports whether err means the caller lacks the privilege to read.
func IsDenied(err error) bool {
	return errors.Is(err, fs.ErrPermission)
}

// ParseError says which file did not parse, where, and what was expected.
type ParseError struct {
	Path string
	// Line is 1-based; 0 when the error is about the whole file.
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// maxQuoted bounds what a parse error quotes of the input: enough to
// recognise the line, never a screenful of garbage.
const maxQuoted = 120

func parseErr(path string, line int, format string, args ...any) error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = safetext.Cap(s, maxQuoted)
		}
	}
	return &ParseError{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// procfsErr names the file in an error from prometheus/procfs: its parse
// errors name neither the file nor, sometimes, anything but themselves
// ("error parsing file: error parsing file: Malformed line ..."), and quote
// whole lines. Errors that are not about parsing (absent, denied) are kept
// as they are, so callers still tell them apart.
func procfsErr(path string, err error) error {
	if !errors.Is(err, procfs.ErrFileParse) {
		return err
	}
	msg := err.Error()
	for prefix := procfs.ErrFileParse.Error() + ": "; strings.HasPrefix(msg, prefix); {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return &ParseError{Path: path, Msg: safetext.Cap(msg, maxQuoted)}
}

// TruncatedError says a file was larger than the cap; what was read still counts.
type TruncatedError struct {
	Path string
	Max  int
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("%s: larger than %d bytes; only the first %d were read", e.Path, e.Max, e.Max)
}
