package pysample

// Line tables: how a code object maps the offset of the instruction a
// frame is at to a source line. Each decoder below follows the algorithm of
// its version's Objects/codeobject.c (PyCode_Addr2Line) and notes
// (Objects/lnotab_notes.txt, Objects/locations.md). The tables come from
// the target's memory, so they are untrusted: every loop is bounded by the
// table's length, and a table that ends early yields the last line found.

// lineFor returns the line of the instruction at byte offset addr, or -1
// when the table says the instruction has none.
func lineFor(f lineFormat, table []byte, first int, addr int64) int {
	if addr < 0 {
		return first
	}
	switch f {
	case lnotab:
		return lnotabLine(table, first, addr)
	case linetable:
		return linetable310(table, first, addr)
	default:
		return locationLine(table, first, addr)
	}
}

// lnotabLine: pairs (address increment, signed line increment), 3.8 and
// 3.9 (Objects/codeobject.c PyCode_Addr2Line).
func lnotabLine(t []byte, line int, addr int64) int {
	var a int64
	for i := 0; i+1 < len(t); i += 2 {
		a += int64(t[i])
		if a > addr {
			break
		}
		line += int(int8(t[i+1]))
	}
	return line
}

// linetable310: pairs (start delta in bytes, signed line delta, -128: no
// line), 3.10 (Objects/codeobject.c: advance, _PyCode_CheckLineNumber).
func linetable310(t []byte, line int, addr int64) int {
	var end int64
	for i := 0; i+1 < len(t); i += 2 {
		start := end
		end += int64(t[i])
		cur := -1
		if d := int8(t[i+1]); d != -128 {
			line += int(d)
			cur = line
		}
		if addr >= start && addr < end {
			return cur
		}
	}
	return -1
}

// Location table codes (Include/cpython/code.h, 3.11+:
// _PyCodeLocationInfoKind).
const (
	locShort0   = 0  // 0-9: short form, same line
	locOneLine0 = 10 // 10-12: one line form, line delta 0, 1, 2
	locNoCols   = 13
	locLong     = 14
	locNone     = 15
)

// locationLine walks the 3.11+ location table (Objects/locations.md;
// Objects/codeobject.c: advance, get_line_delta, scan_varint): entries
// start with a byte whose top bit is set, holding the code (4 bits) and
// the number of code units covered minus one (3 bits).
func locationLine(t []byte, line int, addr int64) int {
	var end int64
	i := 0
	for i < len(t) {
		b := t[i]
		if b&0x80 == 0 {
			return -1 // not the start of an entry: a corrupt table
		}
		code := int(b>>3) & 15
		start := end
		end += int64(b&7+1) * 2
		delta := 0
		switch {
		case code == locNoCols || code == locLong:
			v, _ := svarint(t, i+1)
			delta = v
		case code >= locOneLine0 && code < locNoCols:
			delta = code - locOneLine0
		}
		line += delta
		cur := line
		if code == locNone {
			cur = -1
		}
		if addr >= start && addr < end {
			return cur
		}
		// skip to the next entry start
		i++
		for i < len(t) && t[i]&0x80 == 0 {
			i++
		}
	}
	return -1
}

// varint reads 6-bit groups, low first, continuing while bit 6 is set; it
// stops at the table's end or at 5 groups (30 bits), whichever comes first.
func varint(t []byte, i int) (uint32, int) {
	var v uint32
	for shift := 0; i < len(t) && shift < 30; shift += 6 {
		c := t[i]
		i++
		v |= uint32(c&63) << shift
		if c&64 == 0 {
			break
		}
	}
	return v, i
}

func svarint(t []byte, i int) (int, int) {
	u, n := varint(t, i)
	if u&1 != 0 {
		return -int(u >> 1), n
	}
	return int(u >> 1), n
}
