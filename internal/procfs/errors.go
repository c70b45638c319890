package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// The error set of every reader here. A failed read is one of:
//
//   - absent (ErrAbsent): the file is not there: a kernel without the
//     feature, a device without the attribute, a VM without cpufreq;
//   - vanished (ErrVanished): the process or thread exited between listing
//     and reading (ENOENT or ESRCH under /proc/PID): skip it and count it;
//   - denied (*DeniedError): the file exists but this user may not read it;
//     the error names the privilege that would show it, so callers report
//     "not visible: needs ...", never a zero;
//   - a parse error (*ParseError): the file was read but does not say what
//     it should; the error names the file, the line or byte, what was found
//     and what was expected;
//   - too large (ErrTooLarge): the file is larger than its reader allows;
//     what was read is returned with it, and callers say it was cut.
//
// Errors keep their cause (the errno), so errors.Is(err, fs.ErrNotExist)
// and the like still hold where a caller needs them.
var (
	ErrAbsent   = errors.New("absent")
	ErrVanished = errors.New("vanished")
	ErrTooLarge = errors.New("file larger than expected")
)

// Privileges named in "not visible" facts. /proc checks most per-process
// files with ptrace_may_access: PTRACE_MODE_READ for environ, io, wchan, fd,
// maps, smaps_rollup, numa_maps (same uid, or CAP_SYS_PTRACE),
// PTRACE_MODE_ATTACH for syscall (where Yama's ptrace_scope also applies).
const (
	PrivPtraceRead   = "needs the same uid as the process or CAP_SYS_PTRACE"
	PrivPtraceAttach = "needs CAP_SYS_PTRACE (or the same uid with ptrace_scope 0)"
	// PrivProcMount is for files hidden by procfs mount options.
	PrivProcMount = "needs read access to procfs (mounted with hidepid?) or root"
	// PrivRoot is for the sysfs and procfs files only root may read.
	PrivRoot = "needs root"
)

// DeniedError says a file exists but may not be read, and which privilege
// would show it.
type DeniedError struct {
	Path      string
	Privilege string
	Err       error
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s: not visible: %s (%v)", e.Path, e.Privilege, e.Err)
}

func (e *DeniedError) Unwrap() error { return e.Err }

// NotVisible is the fact to report for the denied field: "not visible: needs ...".
func (e *DeniedError) NotVisible() string { return "not visible: " + e.Privilege }

// pathError is an absent or vanished file: the class, the path and the
// system's error, each reachable with errors.Is.
type pathError struct {
	path  string
	class error // ErrAbsent or ErrVanished
	err   error // the errno, when there is one
}

func (e *pathError) Error() string   { return e.path + ": " + e.class.Error() }
func (e *pathError) Unwrap() []error { return []error{e.class, e.err} }

// IsVanished reports whether err means the task went away.
func IsVanished(err error) bool {
	return errors.Is(err, ErrVanished) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH)
}

// IsAbsent reports whether err means the file is not there, whichever way:
// absent, vanished with its process, or a path through something that is
// not a directory.
func IsAbsent(err error) bool {
	return errors.Is(err, ErrAbsent) || errors.Is(err, ErrVanished) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOTDIR)
}

// IsDenied reports whether err means the caller lacks the privilege to read.
func IsDenied(err error) bool {
	return AsDenied(err) != nil || errors.Is(err, fs.ErrPermission)
}

// AsDenied returns the *DeniedError inside err, or nil.
func AsDenied(err error) *DeniedError {
	var d *DeniedError
	if errors.As(err, &d) {
		return d
	}
	return nil
}

// classify turns a raw errno from opening or reading path into a denied
// error carrying priv, an absent or vanished one (missing says which an
// ENOENT is: ErrVanished under /proc/PID, ErrAbsent elsewhere), or an error
// naming the file.
func classify(path, priv string, missing, err error) error {
	if err == nil {
		return nil
	}
	if pe, ok := err.(*fs.PathError); ok {
		err = pe.Err
	} else if le, ok := err.(*os.LinkError); ok {
		err = le.Err
	}
	switch {
	case errors.Is(err, syscall.ESRCH):
		return &pathError{path: path, class: ErrVanished, err: err}
	case errors.Is(err, syscall.ENOENT):
		return &pathError{path: path, class: missing, err: err}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return &DeniedError{Path: path, Privilege: priv, Err: err}
	}
	return fmt.Errorf("%s: %w", path, err)
}

// ParseError names the file, where in it parsing failed, what was found
// and what was expected.
type ParseError struct {
	File string // "stat", "/proc/1/status"
	// Line is 1-based; 0 when the file is not line-oriented or the error is
	// about the whole file.
	Line int
	// Offset is a byte offset (within the file when Line is 0); -1 when a
	// line, or nothing, is named instead.
	Offset int
	// Got quotes what was found (capped: renderers escape it); "" when
	// nothing is quoted.
	Got  string
	Want string
}

func (e *ParseError) Error() string {
	s := e.File
	switch {
	case e.Line > 0:
		s += ": line " + strconv.Itoa(e.Line)
	case e.Offset >= 0:
		s += ": byte " + strconv.Itoa(e.Offset)
	}
	if e.Got != "" {
		s += ": " + e.Got
	}
	if e.Want != "" {
		s += ": expected " + e.Want
	}
	return s
}

// maxQuoted bounds what a parse error quotes of the input: enough to
// recognise the line, never a screenful of garbage.
const maxQuoted = 120

// parseErr is a ParseError about line (0: the whole file) of path, quoting
// got (capped) and saying what was wanted.
func parseErr(path string, line int, got, want string) *ParseError {
	return &ParseError{File: path, Line: line, Offset: -1, Got: safetext.Cap(got, maxQuoted), Want: want}
}
