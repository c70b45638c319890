package procfs

// Meminfo holds the /proc/meminfo fields gpufeed uses, in bytes; nil where
// the kernel does not write the field (MemAvailable appeared in 3.14).
type Meminfo struct {
	MemTotal     *uint64 `json:"mem_total_bytes,omitempty"`
	MemAvailable *uint64 `json:"mem_available_bytes,omitempty"`
	Dirty        *uint64 `json:"dirty_bytes,omitempty"`
	Writeback    *uint64 `json:"writeback_bytes,omitempty"`
	SwapTotal    *uint64 `json:"swap_total_bytes,omitempty"`
	SwapFree     *uint64 `json:"swap_free_bytes,omitempty"`
}

// Meminfo reads PROC/meminfo.
func (fs FS) Meminfo() (Meminfo, error) {
	path := fs.ProcPath("meminfo")
	b, err := readHost(path, 1<<20)
	if err != nil {
		return Meminfo{}, err
	}
	return ParseMeminfo(path, b)
}

// ParseMeminfo parses "Key:   N kB" lines into the fields gpufeed uses
// (one allocation for all of them); unknown keys are ignored, a known one
// with a malformed value is an error naming the line.
func ParseMeminfo(file string, b []byte) (Meminfo, error) {
	var m Meminfo
	var vals *[6]uint64
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		key, at, ok := cutKey(line)
		if !ok {
			continue
		}
		var dst **uint64
		var slot int
		switch string(key) {
		case "MemTotal":
			dst, slot = &m.MemTotal, 0
		case "MemAvailable":
			dst, slot = &m.MemAvailable, 1
		case "Dirty":
			dst, slot = &m.Dirty, 2
		case "Writeback":
			dst, slot = &m.Writeback, 3
		case "SwapTotal":
			dst, slot = &m.SwapTotal, 4
		case "SwapFree":
			dst, slot = &m.SwapFree, 5
		default:
			continue
		}
		f, k := nextField(line, at)
		v, ok := parseUint(f)
		if !ok {
			return Meminfo{}, &ParseError{File: file, Line: lineNo, Want: string(key) + ": N kB"}
		}
		if unit, _ := nextField(line, k); string(unit) == "kB" {
			v *= 1024
		}
		if vals == nil {
			vals = new([6]uint64)
		}
		vals[slot] = v
		*dst = &vals[slot]
	}
	return m, nil
}
