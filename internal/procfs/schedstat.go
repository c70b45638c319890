package procfs

// Schedstat is /proc/PID/task/TID/schedstat: nanoseconds on CPU, nanoseconds
// runnable but waiting on a run queue, and the number of timeslices run.
type Schedstat struct {
	RunNS, WaitNS, Slices uint64
}

// ParseSchedstat parses "RUN WAIT SLICES\n" without allocating.
func ParseSchedstat(b []byte, s *Schedstat) error {
	if at, ok := parseUintFields(b, &s.RunNS, &s.WaitNS, &s.Slices); !ok {
		return &ParseError{File: "schedstat", Offset: at, Want: "three unsigned integers (run_ns wait_ns slices)"}
	}
	return nil
}
