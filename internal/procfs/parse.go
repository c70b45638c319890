package procfs

import "bytes"

// parseUint parses a decimal unsigned integer from b without allocating.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseInt parses a decimal integer that may be negative.
func parseInt(b []byte) (int64, bool) {
	if len(b) > 0 && b[0] == '-' {
		v, ok := parseUint(b[1:])
		if !ok || v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	v, ok := parseUint(b)
	if !ok || v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// parseUintFields parses the leading space-separated unsigned integers of b
// into dst, in order, without allocating; fields after the last one in dst
// are ignored. On failure the fields before the bad one are already stored,
// and at is the offset where the bad one was looked for.
func parseUintFields(b []byte, dst ...*uint64) (at int, ok bool) {
	for _, d := range dst {
		f, next := nextField(b, at)
		v, ok := parseUint(f)
		if !ok {
			return at, false
		}
		*d = v
		at = next
	}
	return 0, true
}

// nextField returns the next space-separated field of b starting at i, and
// the index just past it. Fields are separated by single or repeated spaces
// or tabs; a newline ends the line.
func nextField(b []byte, i int) (field []byte, next int) {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	start := i
	for i < len(b) && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' {
		i++
	}
	return b[start:i], i
}

// nextLine returns the line of b starting at i (without its newline) and the
// index of the following line.
func nextLine(b []byte, i int) (line []byte, next int) {
	start := i
	for i < len(b) && b[i] != '\n' {
		i++
	}
	if i < len(b) {
		return b[start:i], i + 1
	}
	return b[start:i], i
}

// cutKey splits a "key: value" line at its first colon: the key, and the
// index just past the colon where the value starts. ok is false for a line
// without a colon.
func cutKey(line []byte) (key []byte, valueAt int, ok bool) {
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return nil, 0, false
	}
	return line[:colon], colon + 1, true
}

// hasPrefix is bytes.HasPrefix for a string prefix, without converting.
func hasPrefix(b []byte, p string) bool {
	if len(b) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if b[i] != p[i] {
			return false
		}
	}
	return true
}

// Field finds the first "key: value" line of text whose key, spaces
// trimmed, is key, and returns its value with spaces trimmed: a status
// file's "Tgid:\t42" or "CapEff:\t000001ffffffffff", cpuinfo's
// "model name\t: AMD EPYC 7B13", the NVIDIA driver's "Device Minor: 3".
// ok is false when no line has the key. It is the one reader of a single
// such line; ParseStatus reads a whole status file.
func Field(text []byte, key string) (value string, ok bool) {
	for i := 0; i < len(text); {
		var line []byte
		line, i = nextLine(text, i)
		k, at, found := cutKey(line)
		if found && string(trimSpace(k)) == key {
			return string(trimSpace(line[at:])), true
		}
	}
	return "", false
}
