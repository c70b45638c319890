package procfs

import (
	"os"
	"strconv"
	"syscall"
)

// FDCount returns the number of open file descriptors of pid. Since Linux 6.2
// stat() of /proc/PID/fd reports the count as its size (one system call);
// where it reports 0 (older kernels, fixture trees) the directory is counted.
func (fs FS) FDCount(pid int) (int, error) {
	path := fs.PidPath(pid, "fd")
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, classify(path, PrivPtraceRead, ErrVanished, err)
	}
	if fs.onProcfs && st.Size > 0 {
		return int(st.Size), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, classify(path, PrivPtraceRead, ErrVanished, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return 0, classify(path, PrivPtraceRead, ErrVanished, err)
	}
	return len(names), nil
}

// FDTarget returns what descriptor fd of pid points to: "pipe:[123]",
// "socket:[456]", "anon_inode:[eventpoll]" or a path.
func (fs FS) FDTarget(pid, fd int) (string, error) {
	path := fs.PidPath(pid, "fd/"+strconv.Itoa(fd))
	s, err := os.Readlink(path)
	if err != nil {
		return "", classify(path, PrivPtraceRead, ErrVanished, unwrapPathError(err))
	}
	return s, nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	if le, ok := err.(*os.LinkError); ok {
		return le.Err
	}
	return err
}
