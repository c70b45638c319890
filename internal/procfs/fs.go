package procfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// DefaultRoot is where procfs is mounted on a normal system.
const DefaultRoot = "/proc"

// Privileges named in "not visible" facts. /proc checks most per-process
// files with ptrace_may_access: PTRACE_MODE_READ for environ, io, wchan, fd,
// smaps_rollup (same uid, or CAP_SYS_PTRACE), PTRACE_MODE_ATTACH for syscall
// (where Yama's ptrace_scope also applies).
const (
	PrivPtraceRead   = "needs the same uid as the process or CAP_SYS_PTRACE"
	PrivPtraceAttach = "needs CAP_SYS_PTRACE (or the same uid with ptrace_scope 0)"
	// PrivProcMount is for files hidden by procfs mount options.
	PrivProcMount = "needs read access to procfs (mounted with hidepid?) or root"
)

// FS is a procfs tree rooted somewhere.
type FS struct {
	Root string
	// onProcfs is true when Root is a mounted procfs (not a fixture tree):
	// some pseudo-file conventions (the fd directory's size) hold only there.
	onProcfs bool
}

// procSuperMagic is PROC_SUPER_MAGIC from linux/magic.h.
const procSuperMagic = 0x9fa0

// NewFS returns the procfs tree at root ("" means DefaultRoot). It checks
// that root is a directory, so a mistyped --proc-root fails early and clearly.
func NewFS(root string) (FS, error) {
	if root == "" {
		root = DefaultRoot
	}
	fi, err := os.Stat(root)
	if err != nil {
		return FS{}, fmt.Errorf("proc root: %w", err)
	}
	if !fi.IsDir() {
		return FS{}, fmt.Errorf("proc root %s: not a directory", root)
	}
	var sfs syscall.Statfs_t
	onProcfs := syscall.Statfs(root, &sfs) == nil && sfs.Type == procSuperMagic
	return FS{Root: root, onProcfs: onProcfs}, nil
}

// Path joins elements under the root.
func (fs FS) Path(elem ...string) string {
	return filepath.Join(append([]string{fs.Root}, elem...)...)
}

// PidPath is ROOT/PID/name.
func (fs FS) PidPath(pid int, name string) string {
	return filepath.Join(fs.Root, strconv.Itoa(pid), name)
}

// TaskPath is ROOT/PID/task/TID/name.
func (fs FS) TaskPath(pid, tid int, name string) string {
	return filepath.Join(fs.Root, strconv.Itoa(pid), "task", strconv.Itoa(tid), name)
}

// ErrVanished is wrapped by errors for a process or thread that exited
// between listing and reading (ENOENT, ESRCH).
var ErrVanished = errors.New("vanished")

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

// IsVanished reports whether err means the task went away.
func IsVanished(err error) bool {
	return errors.Is(err, ErrVanished) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH)
}

// AsDenied returns the *DeniedError inside err, or nil.
func AsDenied(err error) *DeniedError {
	var d *DeniedError
	if errors.As(err, &d) {
		return d
	}
	return nil
}

// classify turns a raw errno from opening or reading path into ErrVanished,
// a *DeniedError carrying priv, or a wrapped error naming the file.
func classify(path, priv string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("%s: %w", path, ErrVanished)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return &DeniedError{Path: path, Privilege: priv, Err: err}
	}
	return fmt.Errorf("%s: %w", path, err)
}
