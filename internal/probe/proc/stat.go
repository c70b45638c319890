package proc

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
}

// statFieldsWanted is the highest field ParseStat needs (processor, 39).
const statFieldsWanted = 39

// ParseStat parses a stat line into s without allocating. The command name
// is cut at the LAST ')' because a process may name itself "a) b (c".
func ParseStat(b []byte, s *Stat) error {
	open := -1
	for i, c := range b {
		if c == '(' {
			open = i
			break
		}
	}
	close := -1
	for i := len(b) - 1; i > open; i-- {
		if b[i] == ')' {
			close = i
			break
		}
	}
	if open < 0 || close < 0 {
		return &ParseError{File: "stat", Offset: 0, Want: "PID (comm) ..."}
	}
	s.Comm = b[open+1 : close]
	i := close + 1
	field := 3
	for field <= statFieldsWanted {
		f, next := nextField(b, i)
		if len(f) == 0 {
			return &ParseError{File: "stat", Offset: i, Want: "field " + itoa(field) + " (line ends early)"}
		}
		i = next
		switch field {
		case 3:
			s.State = f[0]
		case 4:
			v, ok := parseInt(f)
			if !ok {
				return &ParseError{File: "stat", Offset: i - len(f), Want: "ppid (field 4) as an integer"}
			}
			s.PPID = int(v)
		case 14, 15, 22:
			v, ok := parseUint(f)
			if !ok {
				return &ParseError{File: "stat", Offset: i - len(f), Want: "field " + itoa(field) + " as an unsigned integer"}
			}
			switch field {
			case 14:
				s.UTime = v
			case 15:
				s.STime = v
			case 22:
				s.StartTime = v
			}
		case 20, 39:
			v, ok := parseInt(f)
			if !ok {
				return &ParseError{File: "stat", Offset: i - len(f), Want: "field " + itoa(field) + " as an integer"}
			}
			if field == 20 {
				s.NumThreads = int(v)
			} else {
				s.Processor = int(v)
			}
		}
		field++
	}
	return nil
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
