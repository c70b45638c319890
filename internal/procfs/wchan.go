package procfs

// ReadWchan returns the kernel function a sleeping task waits in
// ("futex_wait_queue", "pipe_read", "do_epoll_wait"), or "" when it is
// running or the kernel hides it ("0"). Needs PTRACE_MODE_READ.
func (fs FS) ReadWchan(pid, tid int) (string, error) {
	path := fs.TaskPath(pid, tid, "wchan")
	b, err := readCapped(path, PrivPtraceRead, capSmallFile)
	if err != nil {
		return "", err
	}
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	if len(b) == 0 || string(b) == "0" {
		return "", nil
	}
	return string(b), nil
}
