package proc

import "github.com/gpufeed/gpufeed/internal/timeline"

// ParseMeminfo parses /proc/meminfo into the fields gpufeed uses (bytes).
// MemTotal and MemAvailable must be present (MemAvailable exists since 3.14).
func ParseMeminfo(file string, b []byte, m *timeline.MemInfo) error {
	*m = timeline.MemInfo{}
	seen := 0
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		colon := -1
		for j, c := range line {
			if c == ':' {
				colon = j
				break
			}
		}
		if colon < 0 {
			continue
		}
		var dst *uint64
		switch string(line[:colon]) {
		case "MemTotal":
			dst, seen = &m.Total, seen|1
		case "MemAvailable":
			dst, seen = &m.Available, seen|2
		case "Dirty":
			dst = &m.Dirty
		case "Writeback":
			dst = &m.Writeback
		case "SwapTotal":
			dst = &m.SwapTotal
		case "SwapFree":
			dst = &m.SwapFree
		default:
			continue
		}
		f, k := nextField(line, colon+1)
		v, ok := parseUint(f)
		if !ok {
			return &ParseError{File: file, Line: lineNo, Want: string(line[:colon]) + ": N kB"}
		}
		if unit, _ := nextField(line, k); string(unit) == "kB" {
			v *= 1024
		}
		*dst = v
	}
	if seen != 3 {
		return &ParseError{File: file, Offset: -1, Want: "MemTotal and MemAvailable lines"}
	}
	return nil
}
