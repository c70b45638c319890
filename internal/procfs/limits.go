package procfs

import "github.com/gpufeed/gpufeed/internal/timeline"

// NoFile is RLIMIT_NOFILE; Unlimited marks "unlimited".
type NoFile struct {
	Soft, Hard uint64
}

// Unlimited is the value of a limit /proc/PID/limits reports as "unlimited".
const Unlimited = timeline.Unlimited

// ReadNoFile reads the open-files limit from /proc/PID/limits. (procfs's
// ProcLimits carries only the soft column; the hard one matters for "raise
// the soft limit up to the hard one", so the line is parsed here.)
func (fs FS) ReadNoFile(pid int) (NoFile, error) {
	path := fs.PidPath(pid, "limits")
	b, err := readCapped(path, PrivProcMount, capSmallFile)
	if err != nil {
		return NoFile{}, err
	}
	return ParseNoFile(path, b)
}

// ParseNoFile finds the "Max open files  SOFT  HARD  files" line.
func ParseNoFile(file string, b []byte) (NoFile, error) {
	const key = "Max open files"
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		if !hasPrefix(line, key) {
			continue
		}
		soft, k := nextField(line, len(key))
		hard, _ := nextField(line, k)
		var n NoFile
		var ok1, ok2 bool
		n.Soft, ok1 = parseLimit(soft)
		n.Hard, ok2 = parseLimit(hard)
		if !ok1 || !ok2 {
			return NoFile{}, &ParseError{File: file, Line: lineNo, Want: "Max open files SOFT HARD files"}
		}
		return n, nil
	}
	return NoFile{}, &ParseError{File: file, Offset: -1, Want: `a "Max open files" line`}
}

func parseLimit(b []byte) (uint64, bool) {
	if string(b) == "unlimited" {
		return Unlimited, true
	}
	return parseUint(b)
}
