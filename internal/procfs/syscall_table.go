package procfs

// The system calls a blocked thread of an ML job is usually found in (waits,
// I/O, memory management, process control), by number. The numbers are the
// kernel's uapi ones (asm/unistd_64.h for x86-64; asm-generic/unistd.h for
// arm64, which has no poll, select, epoll_wait or pause); a test checks them
// against the headers where those are installed.

var syscallsX8664 = map[int]string{
	0: "read", 1: "write", 3: "close", 5: "fstat", 7: "poll", 8: "lseek", 9: "mmap",
	10: "mprotect", 11: "munmap", 12: "brk", 16: "ioctl", 17: "pread64", 18: "pwrite64",
	19: "readv", 20: "writev", 23: "select", 24: "sched_yield", 28: "madvise", 34: "pause",
	35: "nanosleep", 40: "sendfile", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom",
	46: "sendmsg", 47: "recvmsg", 56: "clone", 61: "wait4", 65: "semop", 70: "msgrcv",
	73: "flock", 74: "fsync", 75: "fdatasync", 128: "rt_sigtimedwait", 130: "rt_sigsuspend",
	202: "futex", 208: "io_getevents", 217: "getdents64", 220: "semtimedop",
	230: "clock_nanosleep", 231: "exit_group", 232: "epoll_wait", 247: "waitid",
	257: "openat", 262: "newfstatat", 270: "pselect6", 271: "ppoll", 275: "splice",
	277: "sync_file_range", 281: "epoll_pwait", 285: "fallocate", 288: "accept4",
	295: "preadv", 299: "recvmmsg", 332: "statx", 333: "io_pgetevents",
	426: "io_uring_enter", 435: "clone3", 441: "epoll_pwait2", 449: "futex_waitv",
}

var syscallsARM64 = map[int]string{
	4: "io_getevents", 22: "epoll_pwait", 29: "ioctl", 32: "flock", 47: "fallocate",
	56: "openat", 57: "close", 61: "getdents64", 62: "lseek", 63: "read", 64: "write",
	65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64", 69: "preadv", 71: "sendfile",
	72: "pselect6", 73: "ppoll", 76: "splice", 79: "newfstatat", 80: "fstat", 82: "fsync",
	83: "fdatasync", 84: "sync_file_range", 94: "exit_group", 95: "waitid", 98: "futex",
	101: "nanosleep", 115: "clock_nanosleep", 124: "sched_yield", 133: "rt_sigsuspend",
	137: "rt_sigtimedwait", 188: "msgrcv", 192: "semtimedop", 193: "semop", 202: "accept",
	203: "connect", 206: "sendto", 207: "recvfrom", 211: "sendmsg", 212: "recvmsg",
	214: "brk", 215: "munmap", 220: "clone", 222: "mmap", 226: "mprotect", 233: "madvise",
	242: "accept4", 243: "recvmmsg", 260: "wait4", 291: "statx", 292: "io_pgetevents",
	426: "io_uring_enter", 435: "clone3", 441: "epoll_pwait2", 449: "futex_waitv",
}
