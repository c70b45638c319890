package procfs

// Layout is where a process's program and its start-up data lie in its
// address space, from /proc/PID/stat: the text segment (fields 26-27), the
// stack's start (28), the data segment, the heap's start, the argument and
// environment strings (45-51, Linux 3.5 and later).
//
// fork copies the address space, so a child that has not exec'd has its
// parent's layout to the byte; exec lays out a new one (at new random
// addresses under ASLR, and with the new program's arguments and
// environment in any case). None of these fields changes during a
// program's life, so a change means an exec.
//
// The kernel prints these fields as 0 to a reader that may not ptrace the
// process (another user's process without CAP_SYS_PTRACE): such a layout
// is not Visible.
type Layout struct {
	StartCode, EndCode uint64
	StartStack         uint64
	StartData, EndData uint64
	StartBrk           uint64
	ArgStart, ArgEnd   uint64
	EnvStart, EnvEnd   uint64
}

// Visible says whether the kernel showed the layout (it zeroes the fields
// for a reader without ptrace access, and a kernel thread has none).
func (l Layout) Visible() bool { return l.StartStack != 0 && l.ArgStart != 0 }

// ParseStatLayout reads the layout fields of a stat line. A kernel older
// than 3.5 prints only up to field 44: the fields it lacks stay 0.
func ParseStatLayout(b []byte) (Layout, error) {
	var l Layout
	open := -1
	for i, c := range b {
		if c == '(' {
			open = i
			break
		}
	}
	close := -1
	for i := min(len(b), open+maxCommLen+2) - 1; i > open && open >= 0; i-- {
		if b[i] == ')' {
			close = i
			break
		}
	}
	if open < 0 || close < 0 || close+2 >= len(b) || b[close+1] != ' ' {
		return l, &ParseError{File: "stat", Offset: 0, Want: "PID (comm) STATE ..."}
	}
	var dst [52]*uint64
	dst[26], dst[27], dst[28] = &l.StartCode, &l.EndCode, &l.StartStack
	dst[45], dst[46], dst[47], dst[48], dst[49], dst[50], dst[51] = &l.StartData, &l.EndData, &l.StartBrk, &l.ArgStart, &l.ArgEnd, &l.EnvStart, &l.EnvEnd
	field := 3 // the state, right after ") "
	i := close + 2
	for field <= 51 && i < len(b) {
		start := i
		for i < len(b) && b[i] != ' ' && b[i] != '\n' {
			i++
		}
		if p := dst[field]; p != nil {
			v, ok := parseUint(b[start:i])
			if !ok {
				return Layout{}, &ParseError{File: "stat", Offset: start, Want: "field " + itoa(field) + " as an unsigned integer"}
			}
			*p = v
		}
		if i >= len(b) || b[i] == '\n' {
			break
		}
		i++
		field++
	}
	if field < 28 {
		return Layout{}, &ParseError{File: "stat", Offset: i, Want: "field 28 (line ends early)"}
	}
	return l, nil
}

// ReadLayout reads path (a /proc/PID/stat) and parses its layout fields.
func ReadLayout(path string) (Layout, error) {
	b, err := readCapped(path, PrivProcMount, capSmallFile)
	if err != nil {
		return Layout{}, err
	}
	l, err := ParseStatLayout(b)
	if pe, ok := err.(*ParseError); ok {
		pe.File = path
	}
	return l, err
}
