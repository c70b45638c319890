package proc

// Schedstat is /proc/PID/task/TID/schedstat: nanoseconds on CPU, nanoseconds
// runnable but waiting on a run queue, and the number of timeslices run.
type Schedstat struct {
	RunNS, WaitNS, Slices uint64
}

// ParseSchedstat parses "RUN WAIT SLICES\n" without allocating.
func ParseSchedstat(b []byte, s *Schedstat) error {
	i := 0
	for k := 0; k < 3; k++ {
		f, next := nextField(b, i)
		v, ok := parseUint(f)
		if !ok {
			return &ParseError{File: "schedstat", Offset: i, Want: "three unsigned integers (run_ns wait_ns slices)"}
		}
		switch k {
		case 0:
			s.RunNS = v
		case 1:
			s.WaitNS = v
		case 2:
			s.Slices = v
		}
		i = next
	}
	return nil
}
