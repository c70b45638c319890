package procfs

import "github.com/gpufeed/gpufeed/internal/timeline"

// HostStat is the part of /proc/stat gpufeed samples.
type HostStat struct {
	CPUs []timeline.CPUTimes
	Ctxt uint64
	// Processes is the forks since boot ("processes"), host-wide.
	Processes    uint64
	ProcsRunning int
	ProcsBlocked int
}

// ParseProcStat parses /proc/stat, appending per-CPU lines ("cpuN ...", not
// the aggregate "cpu" line) to s.CPUs[:0]. Lines it does not use (intr,
// softirq, btime) are skipped without parsing.
func ParseProcStat(file string, b []byte, s *HostStat) error {
	s.CPUs = s.CPUs[:0]
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		switch {
		case hasPrefix(line, "cpu") && len(line) > 3 && line[3] >= '0' && line[3] <= '9':
			name, k := nextField(line, 0)
			n, ok := parseUint(name[3:])
			if !ok {
				return &ParseError{File: file, Line: lineNo, Want: "cpuN"}
			}
			var v [8]uint64 // user nice system idle iowait irq softirq steal
			for j := range v {
				var f []byte
				f, k = nextField(line, k)
				if len(f) == 0 && j >= 4 {
					break // very old kernels end early; the rest stay 0 (absent = none)
				}
				if v[j], ok = parseUint(f); !ok {
					return &ParseError{File: file, Line: lineNo, Want: "cpuN user nice system idle iowait irq softirq steal"}
				}
			}
			s.CPUs = append(s.CPUs, timeline.CPUTimes{CPU: int(n), User: v[0], Nice: v[1], System: v[2],
				Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]})
		case hasPrefix(line, "ctxt "):
			f, _ := nextField(line, 5)
			v, ok := parseUint(f)
			if !ok {
				return &ParseError{File: file, Line: lineNo, Want: "ctxt N"}
			}
			s.Ctxt = v
		case hasPrefix(line, "processes "):
			f, _ := nextField(line, 10)
			v, ok := parseUint(f)
			if !ok {
				return &ParseError{File: file, Line: lineNo, Want: "processes N"}
			}
			s.Processes = v
		case hasPrefix(line, "procs_running "), hasPrefix(line, "procs_blocked "):
			f, _ := nextField(line, 14)
			v, ok := parseUint(f)
			if !ok {
				return &ParseError{File: file, Line: lineNo, Want: "procs_running/procs_blocked N"}
			}
			if line[6] == 'r' {
				s.ProcsRunning = int(v)
			} else {
				s.ProcsBlocked = int(v)
			}
		}
	}
	if len(s.CPUs) == 0 {
		return &ParseError{File: file, Offset: -1, Want: "cpuN lines"}
	}
	return nil
}
