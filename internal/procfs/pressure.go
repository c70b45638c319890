package procfs

// Pressure is one /proc/pressure/{cpu,memory,io} file's cumulative stall
// totals in microseconds. Full is absent for cpu on older kernels.
type Pressure struct {
	SomeUS, FullUS uint64
	HaveFull       bool
}

// ParsePressure parses "some avg10=.. avg60=.. avg300=.. total=N" and the
// "full" line, keeping the totals (rates are computed from consecutive samples).
func ParsePressure(file string, b []byte, p *Pressure) error {
	*p = Pressure{}
	haveSome := false
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		kind, k := nextField(line, 0)
		if len(kind) == 0 {
			continue
		}
		var total uint64
		found := false
		for k < len(line) {
			var f []byte
			f, k = nextField(line, k)
			if hasPrefix(f, "total=") {
				v, ok := parseUint(f[6:])
				if !ok {
					return &ParseError{File: file, Line: lineNo, Want: "total=N"}
				}
				total, found = v, true
			}
		}
		if !found {
			return &ParseError{File: file, Line: lineNo, Want: "some|full ... total=N"}
		}
		switch string(kind) {
		case "some":
			p.SomeUS, haveSome = total, true
		case "full":
			p.FullUS, p.HaveFull = total, true
		}
	}
	if !haveSome {
		return &ParseError{File: file, Offset: -1, Want: `a "some" line`}
	}
	return nil
}
