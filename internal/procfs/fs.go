package procfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Where procfs and sysfs are mounted on a normal system.
const (
	DefaultProc = "/proc"
	DefaultSys  = "/sys"
)

// FS is one machine's /proc and /sys: every reader here is a method on it or
// takes a path it built, so one injectable pair of roots serves a live
// system, a container's /host/proc and /host/sys, and fixture trees. They
// are two roots, not one, because they are two mounts: a container may bind
// the host's /proc without its /sys.
type FS struct {
	// Proc and Sys are the roots of procfs and sysfs.
	Proc string
	Sys  string
	// onProcfs is true when Proc is a mounted procfs (not a fixture tree):
	// some pseudo-file conventions (the fd directory's size) hold only there.
	onProcfs bool
	// NetTables, when set, shares the socket tables Listening reads among
	// the processes of one network namespace for a short while (the node
	// agent: every job on the host's network reads the same tables); nil
	// reads them for every call.
	NetTables *NetTables
}

// procSuperMagic is PROC_SUPER_MAGIC from linux/magic.h.
const procSuperMagic = 0x9fa0

// NewFS returns the tree at procRoot and sysRoot ("" means /proc and /sys).
// It checks that procRoot is a directory, so a mistyped --root fails
// early and clearly.
func NewFS(procRoot, sysRoot string) (FS, error) {
	fs := At(procRoot, sysRoot)
	fi, err := os.Stat(fs.Proc)
	if err != nil {
		return FS{}, fmt.Errorf("proc root: %w", err)
	}
	if !fi.IsDir() {
		return FS{}, fmt.Errorf("proc root %s: not a directory", fs.Proc)
	}
	var sfs syscall.Statfs_t
	fs.onProcfs = syscall.Statfs(fs.Proc, &sfs) == nil && sfs.Type == procSuperMagic
	return fs, nil
}

// At is NewFS without the check, for readers of trees that hold only part
// of a machine (a fixture with a sysfs and no procfs): a file that is not
// there reads as absent.
func At(procRoot, sysRoot string) FS {
	if procRoot == "" {
		procRoot = DefaultProc
	}
	if sysRoot == "" {
		sysRoot = DefaultSys
	}
	return FS{Proc: procRoot, Sys: sysRoot}
}

// ProcPath joins elements under the proc root.
func (fs FS) ProcPath(elem ...string) string {
	return filepath.Join(append([]string{fs.Proc}, elem...)...)
}

// SysPath joins elements under the sys root.
func (fs FS) SysPath(elem ...string) string {
	return filepath.Join(append([]string{fs.Sys}, elem...)...)
}

// PIDDir names a process directory: "self" for pid 0, else the number.
func PIDDir(pid int) string {
	if pid <= 0 {
		return "self"
	}
	return strconv.Itoa(pid)
}

// PidPath is PROC/PID/name ("self" for pid 0).
func (fs FS) PidPath(pid int, name string) string {
	return filepath.Join(fs.Proc, PIDDir(pid), name)
}

// TaskPath is PROC/PID/task/TID/name.
func (fs FS) TaskPath(pid, tid int, name string) string {
	return filepath.Join(fs.Proc, PIDDir(pid), "task", strconv.Itoa(tid), name)
}
