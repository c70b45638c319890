package wire

import (
	"time"

	"golang.org/x/sys/unix"
)

// The protocol's timestamps are CLOCK_MONOTONIC nanoseconds, the clock
// Python's time.monotonic_ns() reads, so that a client's call time and the
// server's model share one time axis across processes. Go's time package does
// not expose that clock's raw value, so it is read once and the process's own
// monotonic readings (the same clock, through the vDSO) extend it.
var (
	anchorWall time.Time // carries Go's monotonic reading
	anchorMono int64
)

func init() {
	var ts unix.Timespec
	anchorWall = time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC exists on every Linux; without it nothing here can work.
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	anchorMono = ts.Nano()
}

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 { return anchorMono + int64(time.Since(anchorWall)) }

// Wall converts a CLOCK_MONOTONIC reading of this boot to wall-clock time.
func Wall(mono int64) time.Time {
	return anchorWall.Add(time.Duration(mono - anchorMono)).Round(0)
}

// Mono converts a wall-clock time (as Wall returns) back to CLOCK_MONOTONIC.
func Mono(t time.Time) int64 { return anchorMono + int64(t.Round(0).Sub(anchorWall.Round(0))) }
