package cpusample

import (
	"encoding/binary"
	"testing"
)

// The maps parser never panics, and what it keeps is ordered and executable.
func FuzzParseMaps(f *testing.F) {
	f.Add([]byte("55d0c8a00000-55d0c8a21000 r-xp 00001000 fe:01 1234 /usr/bin/python3.11\n" +
		"7ffd1a1f0000-7ffd1a1f2000 r-xp 00000000 00:00 0 [vdso]\n"))
	f.Add([]byte("00400000-00401000 r-xp 0 0:0 1 /a b/c (deleted)\n"))
	f.Add([]byte("x-y r-xp 0 0:0 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := parseMaps("maps", b)
		if err != nil {
			return
		}
		for i, m := range ms {
			if m.end < m.start || (i > 0 && ms[i-1].start > m.start) {
				t.Fatalf("bad mapping %+v", m)
			}
		}
	})
}

// The sample decoder never reads past its record.
func FuzzParseSample(f *testing.F) {
	rec := make([]byte, 24+16+8+8+8+16+8)
	binary.LittleEndian.PutUint64(rec[0:], 0x401000)
	binary.LittleEndian.PutUint32(rec[8:], 10)
	binary.LittleEndian.PutUint32(rec[12:], 11)
	binary.LittleEndian.PutUint64(rec[16:], 2)
	binary.LittleEndian.PutUint64(rec[24:], contextUser)
	binary.LittleEndian.PutUint64(rec[32:], 0x401000)
	binary.LittleEndian.PutUint64(rec[40:], 1)  // abi
	binary.LittleEndian.PutUint64(rec[48:], 0)  // sp
	binary.LittleEndian.PutUint64(rec[56:], 16) // stack size
	binary.LittleEndian.PutUint64(rec[80:], 16) // dyn size
	f.Add(rec, uint16(2))
	f.Add(rec[:30], uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, misc uint16) {
		var s sample
		if parseSample(b, misc, &s) && len(s.stack) > len(b) {
			t.Fatal("stack longer than the record")
		}
	})
}
