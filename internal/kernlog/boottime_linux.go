package kernlog

import (
	"syscall"
	"time"
	"unsafe"
)

// SystemBootTime is the wall-clock time at which CLOCK_MONOTONIC was zero:
// now minus the monotonic clock. Printk timestamps use the same clock (the
// kernel's local clock, which, like CLOCK_MONOTONIC, stops during suspend),
// so boot time plus a record's timestamp is its wall time.
func SystemBootTime() (time.Time, error) {
	var ts syscall.Timespec
	const clockMonotonic = 1
	now := time.Now()
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return time.Time{}, errno
	}
	return now.Add(-time.Duration(ts.Nano())), nil
}
