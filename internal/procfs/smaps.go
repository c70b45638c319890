package procfs

// Rollup is the part of /proc/PID/smaps_rollup gpufeed uses, in bytes.
type Rollup struct {
	RSS, PSS, USS uint64 // USS = Private_Clean + Private_Dirty
	Swap          uint64
}

// ReadRollup reads smaps_rollup. Its cost grows with the process's resident
// memory (the kernel walks every mapping: milliseconds per GiB), so callers
// keep it on a slow, budgeted tier.
func (fs FS) ReadRollup(pid int) (Rollup, error) {
	path := fs.PidPath(pid, "smaps_rollup")
	b, err := readCapped(path, PrivPtraceRead, capSmallFile)
	if err != nil {
		return Rollup{}, err
	}
	return ParseRollup(path, b)
}

// ParseRollup parses smaps_rollup ("Pss:   1234 kB" lines after a header).
func ParseRollup(file string, b []byte) (Rollup, error) {
	var r Rollup
	seen := 0
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		// The header line ("00400000-7ffd... ---p 00000000 00:00 0 [rollup]")
		// has no wanted key before its first colon.
		k, at, ok := cutKey(line)
		if !ok {
			continue
		}
		key := string(k)
		var bit int
		switch key {
		case "Rss":
			bit = 1
		case "Pss":
			bit = 2
		case "Private_Clean":
			bit = 4
		case "Private_Dirty":
			bit = 8
		case "Swap":
			bit = 16
		default:
			continue
		}
		f, next := nextField(line, at)
		v, ok := parseUint(f)
		unit, _ := nextField(line, next)
		if !ok || string(unit) != "kB" {
			return r, &ParseError{File: file, Line: lineNo, Want: key + ": N kB"}
		}
		v *= 1024
		switch bit {
		case 1:
			r.RSS = v
		case 2:
			r.PSS = v
		case 4, 8:
			r.USS += v
		case 16:
			r.Swap = v
		}
		seen |= bit
	}
	if seen&(1|2|4|8) != 1|2|4|8 {
		return r, &ParseError{File: file, Offset: -1, Want: "Rss, Pss, Private_Clean and Private_Dirty lines"}
	}
	return r, nil
}
