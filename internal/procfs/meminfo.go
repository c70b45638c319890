package procfs

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
		key, at, ok := cutKey(line)
		if !ok {
			continue
		}
		var dst *uint64
		switch string(key) {
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
		f, k := nextField(line, at)
		v, ok := parseUint(f)
		if !ok {
			return &ParseError{File: file, Line: lineNo, Want: string(key) + ": N kB"}
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
