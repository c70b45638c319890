package procfs

import (
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// OwnPIDs says whether the pids under the proc root are this process's own:
// the root is a mounted procfs of its pid namespace (its /self names this
// process). A host's /proc bound into a container without the host's pid
// namespace numbers processes otherwise, and a fixture tree is no procfs:
// then a pid from the tree must not be handed to a system call.
func (fs FS) OwnPIDs() bool {
	if !fs.onProcfs {
		return false
	}
	self, err := os.Readlink(fs.ProcPath("self"))
	return err == nil && self == strconv.Itoa(os.Getpid())
}

// cpuClockSched is CPUCLOCK_SCHED (linux/posix-timers.h): a CPU clock in
// the scheduler's run time, nanoseconds.
const cpuClockSched = 2

// ProcessCPUNS reads a process's CPU clock (clock_getcpuclockid's clock,
// MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)): the run time of all its
// threads, in nanoseconds, those that exited included. It is the sum of the
// counter each thread's schedstat shows (se.sum_exec_runtime), taken in
// one walk of the threads; /proc/PID/stat walks them twice, formats fifty
// fields and gives utime+stime in clock ticks. The kernel asks no
// permission of a process clock: any process in the pid namespace can be
// read. pid must be in this process's pid namespace (FS.OwnPIDs).
func ProcessCPUNS(pid int) (uint64, error) {
	clk := int32(^uint32(pid)<<3 | cpuClockSched)
	var ts unix.Timespec
	// Raw (no entersyscall): read each tick, it cannot block, and a
	// scheduled system call wakes the Go runtime's monitor thread (sysmon)
	// out of its deep sleep, to poll every 20 µs while the tick runs; in a
	// virtual machine each of its wake-ups costs tens of µs.
	if _, _, e := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, uintptr(clk), uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, e
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec), nil
}
