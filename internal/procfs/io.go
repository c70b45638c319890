package procfs

// IO is /proc/PID/io.
type IO struct {
	RChar, WChar, SyscR, SyscW, ReadBytes, WriteBytes, CancelledWriteBytes uint64
}

// ReadIO reads /proc/PID/io (PTRACE_MODE_READ: denied for other users' processes).
func (fs FS) ReadIO(pid int) (IO, error) {
	path := fs.PidPath(pid, "io")
	b, err := readFileRaw(path, PrivPtraceRead, ErrVanished, capSmallFile)
	if err != nil {
		return IO{}, err
	}
	return ParseIO(path, b)
}

// ParseIO parses "key: value" lines. All six counters gpufeed stores must be present.
func ParseIO(file string, b []byte) (IO, error) {
	var io IO
	seen := 0
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		key, at, ok := cutKey(line)
		if !ok {
			if len(line) == 0 {
				continue
			}
			return io, &ParseError{File: file, Line: lineNo, Want: "key: value"}
		}
		val, _ := nextField(line, at)
		v, ok := parseUint(val)
		if !ok {
			return io, &ParseError{File: file, Line: lineNo, Want: "an unsigned integer after " + string(key)}
		}
		switch string(key) {
		case "rchar":
			io.RChar, seen = v, seen|1
		case "wchar":
			io.WChar, seen = v, seen|2
		case "syscr":
			io.SyscR, seen = v, seen|4
		case "syscw":
			io.SyscW, seen = v, seen|8
		case "read_bytes":
			io.ReadBytes, seen = v, seen|16
		case "write_bytes":
			io.WriteBytes, seen = v, seen|32
		case "cancelled_write_bytes":
			io.CancelledWriteBytes = v
		}
	}
	if seen != 63 {
		return io, &ParseError{File: file, Offset: -1, Want: "rchar, wchar, syscr, syscw, read_bytes and write_bytes"}
	}
	return io, nil
}
