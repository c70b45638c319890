package pysample

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// Memory reads another process's memory. The reader never writes to it.
type Memory interface {
	// ReadAt fills p from the target's address addr, wholly or not at all.
	ReadAt(p []byte, addr uint64) error
}

// ErrFault says an address could not be read: unmapped, or freed and
// reused while the target ran (the reader does not stop it).
var ErrFault = errors.New("address not readable")

// PrivPtrace is the privilege process_vm_readv needs on another process:
// the kernel checks PTRACE_MODE_ATTACH_REALCREDS (same uid with Yama's
// ptrace_scope 0, or CAP_SYS_PTRACE).
const PrivPtrace = "needs CAP_SYS_PTRACE"

// processMemory reads with process_vm_readv(2): one system call per read,
// no ptrace stop, nothing written.
type processMemory struct{ pid int }

func (m processMemory) ReadAt(p []byte, addr uint64) error {
	if len(p) == 0 {
		return nil
	}
	local := []unix.Iovec{{Base: &p[0]}}
	local[0].SetLen(len(p))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}}
	for {
		n, err := unix.ProcessVMReadv(m.pid, local, remote, 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EPERM || err == unix.EACCES:
			return &procfs.DeniedError{Path: fmt.Sprintf("memory of pid %d", m.pid), Privilege: PrivPtrace, Err: err}
		case err == unix.ESRCH:
			return fmt.Errorf("pid %d: %w", m.pid, procfs.ErrVanished)
		case err == unix.EFAULT || err == unix.EIO || (err == nil && n < len(p)):
			return fmt.Errorf("%w: %#x (%d bytes)", ErrFault, addr, len(p))
		case err != nil:
			return fmt.Errorf("process_vm_readv pid %d: %w", m.pid, err)
		}
		return nil
	}
}

// procError classifies an error opening a /proc file of the target.
func procError(path string, err error) error {
	switch {
	case errors.Is(err, os.ErrPermission):
		return &procfs.DeniedError{Path: path, Privilege: PrivPtrace, Err: err}
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: %w", path, procfs.ErrVanished)
	}
	return err
}

// reader wraps a Memory with the little-endian field helpers the walk uses.
type reader struct {
	mem   Memory
	reads int // read calls made, for the cost accounting
	// left is how many reads the current pass may still make: a corrupt
	// or hostile target cannot make one pass read without end.
	left int
}

// maxReadsPerPass bounds the reads of one pass over every thread: a real
// process of a hundred threads fifty frames deep needs a few thousand.
const maxReadsPerPass = 100000

// errBudget says a pass stopped at its read bound.
var errBudget = errors.New("read bound reached")

func (r *reader) read(p []byte, addr uint64) error {
	if r.left <= 0 {
		return errBudget
	}
	r.left--
	r.reads++
	if addr == 0 {
		return fmt.Errorf("%w: NULL", ErrFault)
	}
	return r.mem.ReadAt(p, addr)
}

func (r *reader) ptr(addr uint64) (uint64, error) {
	var b [8]byte
	if err := r.read(b[:], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func u64(b []byte, off uint64) uint64 {
	if off+8 > uint64(len(b)) {
		return 0
	}
	return binary.LittleEndian.Uint64(b[off:])
}

func u32(b []byte, off uint64) uint32 {
	if off+4 > uint64(len(b)) {
		return 0
	}
	return binary.LittleEndian.Uint32(b[off:])
}
