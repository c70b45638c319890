package trace

import (
	"fmt"
	"strconv"
	"time"
)

// MaxTime bounds every time a reader keeps (ns): 2^62, about 146 years, so
// that an end, a difference of two times or a sum of durations cannot
// overflow int64. An end of INT64_MAX (9.2e18 ns) is no time a profiler
// wrote.
const MaxTime = int64(1) << 62

// ImpossibleTime says why a record's [start, end] cannot be a time a
// profiler recorded, "" when it can: a negative start, an end before the
// start, an end past MaxTime.
func ImpossibleTime(start, end int64) string {
	switch {
	case start < 0:
		return "negative start " + strconv.FormatInt(start, 10)
	case end < start:
		return fmt.Sprintf("end %d before start %d", end, start)
	case end > MaxTime:
		return fmt.Sprintf("end %d past 2^62 ns", end)
	}
	return ""
}

// OutsideWindow says why a GPU operation's [start, end] cannot be one the
// profiler recorded in its window [ws, we], "" when it can (or when the
// window is unknown: we <= ws): more than the window's length outside it,
// as a 2.5 h kernel in a 5 ms trace. Profilers take the GPU's activity
// records for the operations that ran in their window and flush them as
// it ends, a little past it, never by a whole window. Only GPU operations
// are held to it: a CPU annotation may outlast the window by far (Kineto
// closes a ProfilerStep range left open at the end: 13 s after a 355 ms
// window in a real trace).
func OutsideWindow(start, end, ws, we int64) string {
	if we <= ws || ws < 0 || we > MaxTime || start < 0 || end > MaxTime {
		return ""
	}
	l := we - ws
	switch {
	case ws-start > l:
		return fmt.Sprintf("starts %v before the %v profiled window", time.Duration(ws-start), time.Duration(l))
	case end-we > l:
		return fmt.Sprintf("ends %v after the %v profiled window", time.Duration(end-we), time.Duration(l))
	}
	return ""
}

// DropOutsideWindow drops the GPU operations OutsideWindow refuses for the
// window [ws, we], before Finish: a reader that learns the window only at
// the end of the file calls it then. They move from the kept count to
// BadTime; it returns how many were dropped and why the first was.
func (b *Builder) DropOutsideWindow(ws, we int64) (n int64, first string) {
	t := b.t
	keep := t.GPU[:0]
	for _, g := range t.GPU {
		if why := OutsideWindow(g.Start, g.End, ws, we); why != "" {
			if n == 0 {
				first = why
			}
			n++
			continue
		}
		keep = append(keep, g)
	}
	t.GPU = keep
	t.Counts.GPUOps -= n
	t.Counts.BadTime += n
	return n, first
}
