package pysample

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// image is a fake target memory: one region at base.
type image struct {
	base uint64
	data []byte
}

func (m *image) ReadAt(p []byte, addr uint64) error {
	if addr < m.base || addr-m.base > uint64(len(m.data)) || uint64(len(p)) > uint64(len(m.data))-(addr-m.base) {
		return fmt.Errorf("%w: %#x", ErrFault, addr)
	}
	copy(p, m.data[addr-m.base:])
	return nil
}

const imgBase = 0x10000

// builder lays out a minimal interpreter of one version's layout: one
// interpreter, one thread, two frames, and the objects they point to.
type builder struct {
	l   layout
	buf []byte
}

func (b *builder) alloc(n int) uint64 {
	off := (len(b.buf) + 15) &^ 15
	b.buf = append(b.buf, make([]byte, off+n-len(b.buf))...)
	return imgBase + uint64(off)
}
func (b *builder) put64(addr, v uint64) { binary.LittleEndian.PutUint64(b.buf[addr-imgBase:], v) }
func (b *builder) put32(addr uint64, v uint32) {
	binary.LittleEndian.PutUint32(b.buf[addr-imgBase:], v)
}

const (
	fakeCodeType    = 0x7000
	fakeUnicodeType = 0x7100
	fakeBytesType   = 0x7200
)

func (b *builder) str(s string) uint64 {
	a := b.alloc(int(b.l.asciiSize) + len(s) + 1)
	b.put64(a+b.l.obType, fakeUnicodeType)
	b.put64(a+b.l.uniLength, uint64(len(s)))
	b.put32(a+b.l.uniState, 1<<2|1<<5|1<<6) // kind 1, compact, ascii
	copy(b.buf[a-imgBase+b.l.asciiSize:], s)
	return a
}

func (b *builder) bytes(p []byte) uint64 {
	a := b.alloc(int(b.l.bytesData) + len(p) + 1)
	b.put64(a+b.l.obType, fakeBytesType)
	b.put64(a+b.l.bytesSize, uint64(len(p)))
	copy(b.buf[a-imgBase+b.l.bytesData:], p)
	return a
}

// code makes a code object whose line table puts every instruction on
// first+1 (after a first entry on first itself).
func (b *builder) code(name, file string, first int) uint64 {
	var table []byte
	switch b.l.lines {
	case lnotab:
		table = []byte{2, 1} // from byte 2: first+1
	case linetable:
		table = []byte{2, 0, 100, 1} // bytes 0-1 on first, 2-101 on first+1
	default:
		table = []byte{0x80 | locNoCols<<3, 0, 0x80 | locNoCols<<3 | 7, 2} // 1 unit on first, 8 on first+1
	}
	size := max(b.l.codeSize, b.l.coCode) + 64
	a := b.alloc(int(size))
	b.put64(a+b.l.obType, fakeCodeType)
	b.put64(a+b.l.coFilename, b.str(file))
	b.put64(a+b.l.coName, b.str(name))
	if b.l.coQualname >= 0 {
		b.put64(a+uint64(b.l.coQualname), b.str(name))
	}
	b.put64(a+b.l.coLineTable, b.bytes(table))
	b.put32(a+b.l.coFirstLineno, uint32(first))
	return a
}

// frame makes a frame at instruction byte offset 4 of code.
func (b *builder) frame(code, back uint64) uint64 {
	a := b.alloc(int(b.l.frameSize))
	b.put64(a+b.l.fCode, code)
	b.put64(a+b.l.fBack, back)
	if b.l.interpFrames {
		b.put64(a+b.l.fLasti, code+b.l.coCode+4)
	} else {
		b.put32(a+b.l.fLasti, uint32(4/b.l.lastiScale))
	}
	return a
}

// build returns the image and the binary it describes.
func build(t testing.TB, minor int) (*image, *pyBinary) {
	l, err := layoutFor(3, minor)
	if err != nil {
		t.Fatal(err)
	}
	if minor >= 13 {
		// a _PyRuntime that starts with _Py_DebugOffsets as 3.13 fills it
		l = fake313Layout()
	}
	l.finalize()
	b := &builder{l: l}
	rt := b.alloc(4096)
	interp := b.alloc(1024)
	ts := b.alloc(1024)
	b.put64(rt+l.rtInterpHead, interp)
	b.put64(interp+l.isThreadsHead, ts)
	b.put64(ts+l.tsInterp, interp)
	b.put64(ts+l.tsThreadID, 0)
	outer := b.frame(b.code("outer", "train.py", 10), 0)
	inner := b.frame(b.code("inner", "train.py", 20), outer)
	if l.cfCurrent >= 0 {
		cf := b.alloc(64)
		b.put64(cf+uint64(l.cfCurrent), inner)
		b.put64(ts+l.tsFrame, cf)
	} else {
		b.put64(ts+l.tsFrame, inner)
	}
	if l.tsNativeID >= 0 {
		b.put32(ts+uint64(l.tsNativeID), 4242)
	}
	if minor >= 13 {
		writeDebugOffsets(b, rt, l)
	}
	bin := &pyBinary{path: "libpython3.so", runtime: rt, codeType: fakeCodeType, unicodeTyp: fakeUnicodeType, bytesType: fakeBytesType,
		major: 3, minor: minor, patch: 0, version: fmt.Sprintf("3.%d.0", minor)}
	return &image{base: imgBase, data: b.buf}, bin
}

// fake313Layout is a plausible 3.13 layout (the real one comes from the
// target); offsets chosen apart from each other.
func fake313Layout() layout {
	l, _ := layoutFor(3, 13)
	l.rtInterpHead, l.isNext, l.isThreadsHead, l.isGILPtr, l.gilLocked, l.gilHolder = 600, 0, 72, 96, 16, 8
	l.tsNext, l.tsInterp, l.tsFrame, l.tsThreadID, l.tsNativeID = 8, 16, 56, 136, 144
	l.fBack, l.fCode, l.fLasti, l.fOwner = 8, 0, 56, 70
	l.coFilename, l.coName, l.coQualname, l.coLineTable, l.coFirstLineno, l.coCode = 112, 120, 128, 136, 68, 200
	return l
}

func writeDebugOffsets(b *builder, rt uint64, l layout) {
	copy(b.buf[rt-imgBase:], debugCookie)
	b.put64(rt+doVersion, 0x030d00f0)
	for off, v := range map[int]uint64{doRtInterpHead: l.rtInterpHead, doIsNext: l.isNext, doIsThreadsHead: l.isThreadsHead,
		doIsCevalGIL: uint64(l.isGILPtr), doIsGILState: 200, doIsGILLocked: 200 + l.gilLocked, doIsGILHolder: 200 + l.gilHolder,
		doTsNext: l.tsNext, doTsInterp: l.tsInterp, doTsCurrentFrame: l.tsFrame, doTsThreadID: l.tsThreadID, doTsNativeThreadID: uint64(l.tsNativeID),
		doIfSize: 80, doIfPrevious: l.fBack, doIfExecutable: l.fCode, doIfInstrPtr: l.fLasti, doIfOwner: uint64(l.fOwner),
		doCoFilename: l.coFilename, doCoName: l.coName, doCoQualname: uint64(l.coQualname), doCoLinetable: l.coLineTable,
		doCoFirstlineno: l.coFirstLineno, doCoCodeAdaptive: l.coCode, doObType: l.obType, doBytesObSize: l.bytesSize,
		doBytesObSval: l.bytesData, doUniState: l.uniState, doUniLength: l.uniLength, doUniASCIISize: l.asciiSize} {
		b.put64(rt+uint64(off), v)
	}
}

func targetOf(t testing.TB, img Memory, bin *pyBinary) (*Target, error) {
	return openBinary(procfs.At(t.TempDir(), t.TempDir()), 1, img, bin)
}

// The walk over a built image of every version's layout reads back the
// frames it was given: a check of the walk and of the three line-table
// decoders that needs no interpreter installed.
func TestWalkBuiltImages(t *testing.T) {
	for minor := 8; minor <= 13; minor++ {
		t.Run(fmt.Sprintf("3.%d", minor), func(t *testing.T) {
			img, bin := build(t, minor)
			tg, err := targetOf(t, img, bin)
			if err != nil {
				t.Fatal(err)
			}
			stacks, skipped, err := tg.Stacks()
			if err != nil || skipped != 0 || len(stacks) != 1 {
				t.Fatalf("%v skipped %d %+v", err, skipped, stacks)
			}
			var got []string
			for _, f := range stacks[0].Frames {
				got = append(got, f.String())
			}
			if s := strings.Join(got, " <- "); s != "inner (train.py:21) <- outer (train.py:11)" {
				t.Errorf("got %s", s)
			}
			if minor >= 11 && stacks[0].TID != 4242 {
				t.Errorf("tid %d, want native_thread_id 4242", stacks[0].TID)
			}
		})
	}
}

// A frame list that loops back on itself (a torn read) is not followed
// forever and shows nothing of that thread.
func TestFrameLoopIsTorn(t *testing.T) {
	img, bin := build(t, 11)
	tg, err := targetOf(t, img, bin)
	if err != nil {
		t.Fatal(err)
	}
	ips, _ := tg.w.interpreters()
	ths, _ := tg.w.threads(ips[0])
	inner := ths[0].frame
	outer := u64(img.data[inner-imgBase:], tg.w.l.fBack)
	binary.LittleEndian.PutUint64(img.data[outer-imgBase+tg.w.l.fBack:], inner)
	if _, _, err := tg.w.frames(inner); !errors.Is(err, errTorn) {
		t.Fatalf("got %v, want a torn stack", err)
	}
}

// The debug offsets are checked: a wrong cookie or version is a layout
// error, not a guess.
func TestDebugOffsetsChecked(t *testing.T) {
	img, bin := build(t, 13)
	bad := append([]byte(nil), img.data...)
	copy(bad[bin.runtime-imgBase:], "xdebugpz")
	if _, err := targetOf(t, &image{base: imgBase, data: bad}, bin); err == nil || !strings.Contains(err.Error(), "CPython 3.13.0 layout unknown") {
		t.Errorf("cookie: %v", err)
	}
	bad = append([]byte(nil), img.data...)
	binary.LittleEndian.PutUint64(bad[bin.runtime-imgBase+doVersion:], 0x030e00f0)
	if _, err := targetOf(t, &image{base: imgBase, data: bad}, bin); err == nil || !strings.Contains(err.Error(), "says version 0x30e00f0") {
		t.Errorf("version: %v", err)
	}
}

// FuzzWalk reads a target memory made of arbitrary bytes laid over a
// built image: whatever it holds, the walk ends, keeps its bounds and
// shows no frame it did not check.
func FuzzWalk(f *testing.F) {
	for minor := 8; minor <= 13; minor++ {
		img, _ := build(f, minor)
		f.Add(uint8(minor), img.data)
	}
	f.Fuzz(func(t *testing.T, minor uint8, data []byte) {
		m := 8 + int(minor)%6
		if len(data) > 64<<10 {
			return
		}
		_, bin := build(t, m)
		tg, err := targetOf(t, &image{base: imgBase, data: data}, bin)
		if err != nil {
			return
		}
		stacks, _, _ := tg.Stacks()
		for _, s := range stacks {
			if len(s.Frames) > MaxFrames {
				t.Fatalf("%d frames", len(s.Frames))
			}
			for _, fr := range s.Frames {
				if len(fr.Function) > maxStringByte+3 || len(fr.File) > maxStringByte+3 || fr.Line < 0 {
					t.Fatalf("frame %q %q %d", fr.Function, fr.File, fr.Line)
				}
			}
		}
	})
}

func FuzzLineTables(f *testing.F) {
	f.Add([]byte{2, 1, 4, 255}, 10, int64(4))
	f.Add([]byte{0x80 | locLong<<3 | 3, 3, 1, 2, 3, 0x80 | locNone<<3}, 1, int64(6))
	f.Add([]byte{2, 0x80, 100, 1}, 7, int64(50))
	f.Fuzz(func(t *testing.T, table []byte, first int, addr int64) {
		for _, lf := range []lineFormat{lnotab, linetable, locations} {
			_ = lineFor(lf, table, first, addr)
		}
	})
}

func FuzzParseMaps(f *testing.F) {
	f.Add("7f0000000000-7f0000001000 r-xp 00001000 08:01 1234   /usr/lib/libpython3.11.so.1.0\n00400000-00401000 r--p 00000000 08:01 99 /usr/bin/python3.11 (deleted)\n")
	f.Fuzz(func(t *testing.T, s string) {
		ms, _ := parseMaps(strings.NewReader(s))
		for _, m := range ms {
			if m.end < m.start || !strings.HasPrefix(m.path, "/") {
				t.Fatalf("%+v", m)
			}
		}
	})
}
