package procfs

import (
	"strconv"

	"github.com/gpufeed/gpufeed/internal/cpuset"
)

// Stat holds the fields of /proc/PID/task/TID/stat (or /proc/PID/stat)
// gpufeed uses. Field numbers are proc(5)'s.
type Stat struct {
	// Comm aliases the buffer that was parsed: copy it to keep it.
	Comm       []byte
	State      byte   // field 3
	PPID       int    // field 4
	UTime      uint64 // field 14, clock ticks
	STime      uint64 // field 15, clock ticks
	NumThreads int    // field 20
	StartTime  uint64 // field 22, clock ticks since boot
	Processor  int    // field 39, CPU last run on
	// CUTime and CSTime (fields 16, 17, clock ticks) are the CPU of the
	// process's children it has waited for: per process, the same in
	// every thread's stat. A child that lives less than a sampling
	// interval shows only here, in its parent, once reaped.
	CUTime, CSTime uint64
}

// maxCommLen bounds the command name in stat (kernel threads' full names
// reach 64 bytes; user tasks' 15).
const maxCommLen = 64

// statFieldsWanted is the highest field ParseStat needs (processor, 39).
const statFieldsWanted = 39

// statWanted marks the fields ParseStat converts; the others are skipped.
var statWanted = [statFieldsWanted + 1]bool{4: true, 14: true, 15: true, 16: true, 17: true, 20: true, 22: true, 39: true}

// ParseStat parses a stat line into s without allocating, in one pass over
// the bytes after the command name. The name is cut at the LAST ')' because
// a process may name itself "a) b (c".
func ParseStat(b []byte, s *Stat) error {
	open := -1
	for i, c := range b {
		if c == '(' {
			open = i
			break
		}
	}
	// The name is at most 64 bytes (TASK_COMM_LEN for tasks, longer for
	// some kernel threads) and nothing after it holds a ')': the last ')'
	// within that reach closes it, without scanning the whole line.
	close := -1
	end := min(len(b), open+maxCommLen+2)
	for i := end - 1; i > open; i-- {
		if b[i] == ')' {
			close = i
			break
		}
	}
	if open < 0 || close < 0 || close+3 >= len(b) || b[close+1] != ' ' {
		return &ParseError{File: "stat", Offset: 0, Want: "PID (comm) STATE ..."}
	}
	s.Comm = b[open+1 : close]
	s.State = b[close+2]
	// Fields 4..39: unsigned decimals, except that ppid, num_threads and
	// processor are signed in the kernel's format (-1 appears in some fields).
	i := close + 3
	for field := 4; field <= statFieldsWanted; field++ {
		if i >= len(b) || b[i] != ' ' {
			return &ParseError{File: "stat", Offset: i, Want: "field " + itoa(field) + " (line ends early)"}
		}
		i++
		start := i
		if !statWanted[field] {
			// Skip without converting: fields 23-38 are long addresses.
			for i < len(b) && b[i] != ' ' && b[i] != '\n' {
				i++
			}
			if i == start {
				return &ParseError{File: "stat", Offset: start, Want: "field " + itoa(field)}
			}
			continue
		}
		neg := false
		if i < len(b) && b[i] == '-' {
			neg = true
			i++
		}
		var v uint64
		digits := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if v > (1<<64-1)/10 {
				return &ParseError{File: "stat", Offset: start, Want: "field " + itoa(field) + " within 64 bits"}
			}
			v = v*10 + uint64(b[i]-'0')
			i++
			digits++
		}
		if digits == 0 || (i < len(b) && b[i] != ' ' && b[i] != '\n') {
			return &ParseError{File: "stat", Offset: start, Want: "field " + itoa(field) + " as an integer"}
		}
		switch field {
		case 4:
			s.PPID = signed(v, neg)
		case 14, 15, 16, 17, 22:
			if neg {
				return &ParseError{File: "stat", Offset: start, Want: "field " + itoa(field) + " as an unsigned integer"}
			}
			switch field {
			case 14:
				s.UTime = v
			case 15:
				s.STime = v
			case 16:
				s.CUTime = v
			case 17:
				s.CSTime = v
			case 22:
				s.StartTime = v
			}
		case 20:
			s.NumThreads = signed(v, neg)
		case 39:
			s.Processor = signed(v, neg)
		}
	}
	return nil
}

func signed(v uint64, neg bool) int {
	if neg {
		return -int(v)
	}
	return int(v)
}

// itoa formats a small non-negative int for error messages (errors are
// off the hot path, but avoiding strconv keeps this file self-contained).
func itoa(v int) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := v < 0
	if neg {
		v = -v
	}
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// ReadStatOnce opens, reads and closes a stat file (discovery and one-off
// reads; the hot path keeps the file open instead). Comm is copied.
func ReadStatOnce(path string) (Stat, error) {
	b, err := readCapped(path, PrivProcMount, capSmallFile)
	if err != nil {
		return Stat{}, err
	}
	var s Stat
	if err := ParseStat(b, &s); err != nil {
		if pe, ok := err.(*ParseError); ok {
			pe.File = path
		}
		return Stat{}, err
	}
	s.Comm = append([]byte(nil), s.Comm...)
	return s, nil
}

// LastCPU reads field 39 ("processor": the CPU the task last ran on) of
// PROC/PID/task/TID/stat.
func (fs FS) LastCPU(pid, tid int) (int, error) {
	path := fs.TaskPath(pid, tid, "stat")
	b, err := readCapped(path, PrivProcMount, capSmallFile)
	if err != nil {
		return 0, err
	}
	return ParseStatProcessor(path, b)
}

// ParseStatProcessor extracts the processor field of a stat line with
// ParseStat, which finds the command name's closing ')' even when the name
// holds spaces and parentheses.
func ParseStatProcessor(path string, b []byte) (int, error) {
	var st Stat
	if err := ParseStat(b, &st); err != nil {
		if pe, ok := err.(*ParseError); ok {
			pe.File = path
		}
		return 0, err
	}
	if st.Processor < 0 || st.Processor >= cpuset.MaxID {
		return 0, parseErr(path, 1, "processor "+strconv.Itoa(st.Processor), "a CPU number")
	}
	return st.Processor, nil
}
