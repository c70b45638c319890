package sim

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// shm is a shared memory region the server makes and hands to clients: an
// anonymous memfd, sealed against resizing so that no client can shrink it
// under the server's reads, and the server's mapping of it.
type shm struct {
	fd int // -1 once closed; the mapping outlives it
	b  []byte
}

func newShm(name string, size int) (*shm, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sizing shared memory: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sealing shared memory: %w", err)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mapping shared memory: %w", err)
	}
	return &shm{fd: fd, b: b}, nil
}

func (m *shm) closeFD() {
	if m.fd >= 0 {
		unix.Close(m.fd)
		m.fd = -1
	}
}

func (m *shm) close() {
	m.closeFD()
	if m.b != nil {
		unix.Munmap(m.b)
		m.b = nil
	}
}
