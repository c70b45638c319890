package procfs

// Status holds the /proc/PID/status (or task/TID/status) fields gpufeed uses.
type Status struct {
	VoluntaryCtxt, NonvoluntaryCtxt uint64
	HaveCtxt                        bool
	Threads                         int
	CPUsAllowedList                 string
	MemsAllowedList                 string
	// NSpid lists the pid in each nested pid namespace, outermost first.
	NSpid []int
}

// ReadStatus reads and parses PATH (a status file) on the slow tier.
func ReadStatus(path string) (Status, error) {
	b, err := readCapped(path, PrivProcMount, capStatus)
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(path, b)
}

// ParseStatus parses "Key:\tvalue" lines; unknown keys are ignored. Values
// gpufeed uses that are present but malformed are an error naming the line.
func ParseStatus(file string, b []byte) (Status, error) {
	var s Status
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		key, at, ok := cutKey(line)
		if !ok {
			continue
		}
		val, _ := nextField(line, at)
		switch string(key) {
		case "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches":
			v, ok := parseUint(val)
			if !ok {
				return s, &ParseError{File: file, Line: lineNo, Want: string(key) + " as an unsigned integer"}
			}
			if key[0] == 'v' {
				s.VoluntaryCtxt = v
			} else {
				s.NonvoluntaryCtxt = v
			}
			s.HaveCtxt = true
		case "Threads":
			v, ok := parseUint(val)
			if !ok {
				return s, &ParseError{File: file, Line: lineNo, Want: "Threads as an unsigned integer"}
			}
			s.Threads = int(v)
		case "Cpus_allowed_list":
			s.CPUsAllowedList = string(val)
		case "Mems_allowed_list":
			s.MemsAllowedList = string(val)
		case "NSpid":
			s.NSpid = s.NSpid[:0]
			for k := at; k < len(line); {
				var f []byte
				f, k = nextField(line, k)
				if len(f) == 0 {
					break
				}
				v, ok := parseUint(f)
				if !ok {
					return s, &ParseError{File: file, Line: lineNo, Want: "NSpid as a list of pids"}
				}
				s.NSpid = append(s.NSpid, int(v))
			}
		}
	}
	return s, nil
}
