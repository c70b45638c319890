package procfs

import "github.com/gpufeed/gpufeed/internal/timeline"

// ParseDiskstats parses /proc/diskstats, appending to dst[:0] the devices
// keep accepts (nil keeps all). Fields per Documentation/admin-guide/iostats.rst:
// major minor name reads merged sectors ms writes merged sectors ms inflight io_ticks weighted...
func ParseDiskstats(file string, b []byte, dst []timeline.DiskStat, keep func(name []byte) bool) ([]timeline.DiskStat, error) {
	dst = dst[:0]
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		_, k := nextField(line, 0) // major
		if k == 0 || len(line) == 0 {
			continue
		}
		_, k = nextField(line, k) // minor
		name, k := nextField(line, k)
		if len(name) == 0 {
			return dst, &ParseError{File: file, Line: lineNo, Want: "major minor name counters..."}
		}
		if keep != nil && !keep(name) {
			continue
		}
		var v [11]uint64
		for j := range v {
			var f []byte
			f, k = nextField(line, k)
			var ok bool
			if v[j], ok = parseUint(f); !ok {
				return dst, &ParseError{File: file, Line: lineNo, Want: "11 counters after the device name"}
			}
		}
		dst = append(dst, timeline.DiskStat{Name: string(name), Reads: v[0], SectorsRead: v[2], ReadMS: v[3],
			Writes: v[4], SectorsWrite: v[6], WriteMS: v[7], InFlight: v[8], IOTicksMS: v[9], QueueMS: v[10]})
	}
	return dst, nil
}
