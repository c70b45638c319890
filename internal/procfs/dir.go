package procfs

import (
	"syscall"
	"unsafe"
)

// Dir is a /proc directory (the root or a task/ directory) held open and
// re-listed from the start on each call, parsing numeric entry names
// straight out of the getdents buffer: listing allocates nothing.
type Dir struct {
	fd   int
	path string
	buf  []byte
}

// OpenDir opens path for repeated numeric listings.
func OpenDir(path string) (*Dir, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, classify(path, PrivProcMount, ErrVanished, err)
	}
	return &Dir{fd: fd, path: path, buf: make([]byte, 16<<10)}, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// EachNumeric calls fn with every entry whose name is a decimal number
// (pids, tids), in the kernel's order. Listing a task/ directory of a process
// that exited fails with ENOENT or returns nothing.
func (d *Dir) EachNumeric(fn func(n int)) error {
	if _, err := syscall.Seek(d.fd, 0, 0); err != nil {
		return classify(d.path, PrivProcMount, ErrVanished, err)
	}
	for {
		n, err := syscall.Getdents(d.fd, d.buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return classify(d.path, PrivProcMount, ErrVanished, err)
		}
		if n <= 0 {
			return nil
		}
		walkDirents(d.buf[:n], fn)
	}
}

// NLink is the directory's link count. For /proc/PID/task it is the number
// of threads plus 2 (proc_task_getattr), one fstat instead of a listing.
func (d *Dir) NLink() (uint64, error) {
	var st syscall.Stat_t
	// Raw (no entersyscall), as the kept files' preads: made every tick,
	// it cannot block (see ProcessCPUNS).
	if _, _, e := syscall.RawSyscall(syscall.SYS_FSTAT, uintptr(d.fd), uintptr(unsafe.Pointer(&st)), 0); e != 0 {
		return 0, classify(d.path, PrivProcMount, ErrVanished, e)
	}
	return uint64(st.Nlink), nil
}

// Close releases the directory.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := syscall.Close(d.fd)
	d.fd = -1
	return err
}

// linux_dirent64: u64 ino; s64 off; u16 reclen; u8 type; char name[].
const direntNameOff = int(unsafe.Offsetof(syscall.Dirent{}.Name))

func walkDirents(b []byte, fn func(n int)) {
	for len(b) >= direntNameOff {
		reclen := int(b[16]) | int(b[17])<<8
		if reclen <= direntNameOff || reclen > len(b) {
			return
		}
		name := b[direntNameOff:reclen]
		v, ok := 0, len(name) > 0 && name[0] != 0
		for _, c := range name {
			if c == 0 {
				break
			}
			if c < '0' || c > '9' || v > 1<<40 {
				ok = false
				break
			}
			v = v*10 + int(c-'0')
		}
		if ok {
			fn(v)
		}
		b = b[reclen:]
	}
}
