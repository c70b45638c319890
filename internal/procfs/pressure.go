package procfs

import "strconv"

// Pressure is one /proc/pressure/{cpu,memory,io} file. Some is the share of
// time at least one task stalled on the resource, Full the share all
// non-idle tasks did; Full is nil for cpu on kernels before 5.13.
type Pressure struct {
	Some *PressureLine `json:"some,omitempty"`
	Full *PressureLine `json:"full,omitempty"`
}

// PressureLine is one line of a pressure file: percentages of wall time
// over the last 10, 60 and 300 seconds, and the cumulative stall in
// microseconds (rates over a window come from two readings of it).
type PressureLine struct {
	Avg10   float64 `json:"avg10"`
	Avg60   float64 `json:"avg60"`
	Avg300  float64 `json:"avg300"`
	TotalUS uint64  `json:"total_us"`
}

// Pressure reads PROC/pressure/<resource> ("cpu", "memory", "io").
func (fs FS) Pressure(resource string) (Pressure, error) {
	path := fs.ProcPath("pressure", resource)
	b, err := readHost(path, capSmallFile)
	if err != nil {
		return Pressure{}, err
	}
	return ParsePressure(path, b)
}

// ParsePressure parses "some avg10=A avg60=B avg300=C total=N" and the
// "full" line. Every line needs its total; the "some" line must be there.
func ParsePressure(file string, b []byte) (Pressure, error) {
	var p Pressure
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		kind, k := nextField(line, 0)
		if len(kind) == 0 {
			continue
		}
		var l PressureLine
		found := false
		for k < len(line) {
			var f []byte
			f, k = nextField(line, k)
			var dst *float64
			switch {
			case hasPrefix(f, "total="):
				v, ok := parseUint(f[6:])
				if !ok {
					return Pressure{}, &ParseError{File: file, Line: lineNo, Want: "total=N"}
				}
				l.TotalUS, found = v, true
				continue
			case hasPrefix(f, "avg10="):
				dst, f = &l.Avg10, f[6:]
			case hasPrefix(f, "avg60="):
				dst, f = &l.Avg60, f[6:]
			case hasPrefix(f, "avg300="):
				dst, f = &l.Avg300, f[7:]
			default:
				continue
			}
			v, err := strconv.ParseFloat(string(f), 64)
			if err != nil || v < 0 || v > 100 {
				return Pressure{}, &ParseError{File: file, Line: lineNo, Want: "avgN=P, a percentage"}
			}
			*dst = v
		}
		if !found {
			return Pressure{}, &ParseError{File: file, Line: lineNo, Want: "some|full ... total=N"}
		}
		switch string(kind) {
		case "some":
			p.Some = &l
		case "full":
			p.Full = &l
		}
	}
	if p.Some == nil {
		return Pressure{}, &ParseError{File: file, Offset: -1, Want: `a "some" line`}
	}
	return p, nil
}

// FullUS is the full line's total, 0 where the kernel writes none.
func (p Pressure) FullUS() uint64 {
	if p.Full == nil {
		return 0
	}
	return p.Full.TotalUS
}
