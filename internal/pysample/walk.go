package pysample

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bounds on what is read of the target: its memory is untrusted input (a
// torn read while it runs, a corrupt interpreter, a hostile process), so
// every list, loop and string is capped.
const (
	maxInterpreters = 64
	maxThreads      = 4096
	// MaxFrames is the deepest stack kept per thread (innermost frames);
	// deeper ones are cut and say so.
	MaxFrames     = 512
	maxStringLen  = 4096     // characters of a function or file name
	maxLineTable  = 1 << 20  // bytes of one code object's line table
	maxCodeCache  = 16384    // code objects remembered between samples
	maxCacheBytes = 64 << 20 // their line tables and names together
	maxStringByte = maxStringLen * 4
)

// threadState is one PyThreadState as read.
type threadState struct {
	addr     uint64
	threadID uint64 // pthread_t
	nativeID int    // OS tid from native_thread_id (3.11+), 0 before
	frame    uint64 // first frame pointer
}

// rawFrame is one frame: its code object and line.
type rawFrame struct {
	code *codeInfo
	line int
}

// codeInfo is what is kept of a code object.
type codeInfo struct {
	filename, name, qualname uint64 // pointers, to tell a reused address
	linetab                  uint64
	first                    int
	Function, File           string
	table                    []byte
}

// walker reads one interpreter's structures.
type walker struct {
	r     *reader
	l     layout
	b     *pyBinary
	codes map[uint64]*codeInfo
	// cached is the bytes the code cache holds (line tables and names)
	cached int
	// buffers reused between reads
	fbuf, cbuf []byte
}

func (w *walker) layoutErr(why string, args ...any) error {
	return &LayoutError{Version: fmt.Sprintf("%d.%d", w.b.major, w.b.minor), Why: fmt.Sprintf(why, args...)}
}

// finalize sizes the frame and code reads from the fields they hold.
func (l *layout) finalize() {
	maxf := func(xs ...int64) uint64 {
		var m int64
		for _, x := range xs {
			if x > m {
				m = x
			}
		}
		return uint64(m)
	}
	l.frameSize = maxf(int64(l.fBack), int64(l.fCode), int64(l.fLasti), l.fOwner-7) + 8
	l.codeSize = maxf(int64(l.coFilename), int64(l.coName), l.coQualname, int64(l.coLineTable), int64(l.coFirstLineno)) + 8
}

// interpreters lists the interpreter states, main last as CPython links
// them (newest first).
func (w *walker) interpreters() ([]uint64, error) {
	head, err := w.r.ptr(w.b.runtime + w.l.rtInterpHead)
	if err != nil {
		return nil, err
	}
	var out []uint64
	seen := map[uint64]bool{}
	for p := head; p != 0 && len(out) < maxInterpreters && !seen[p]; {
		seen[p] = true
		out = append(out, p)
		if p, err = w.r.ptr(p + w.l.isNext); err != nil {
			return out, err
		}
	}
	return out, nil
}

// threads lists one interpreter's thread states.
func (w *walker) threads(interp uint64) ([]threadState, error) {
	p, err := w.r.ptr(interp + w.l.isThreadsHead)
	if err != nil {
		return nil, err
	}
	var out []threadState
	seen := map[uint64]bool{}
	size := max(w.l.tsNext, w.l.tsInterp, w.l.tsThreadID, w.l.tsFrame, uint64(max(w.l.tsNativeID, 0))) + 8
	buf := make([]byte, size)
	for p != 0 && len(out) < maxThreads && !seen[p] {
		seen[p] = true
		if err := w.r.read(buf, p); err != nil {
			return out, err
		}
		if u64(buf, w.l.tsInterp) != interp {
			return out, w.layoutErr("a thread state at %#x does not point back to its interpreter", p)
		}
		ts := threadState{addr: p, threadID: u64(buf, w.l.tsThreadID), frame: u64(buf, w.l.tsFrame)}
		if w.l.tsNativeID >= 0 {
			ts.nativeID = int(int32(u32(buf, uint64(w.l.tsNativeID))))
		}
		if w.l.cfCurrent >= 0 && ts.frame != 0 {
			// 3.11, 3.12: the thread state points at a _PyCFrame
			if ts.frame, err = w.r.ptr(ts.frame + uint64(w.l.cfCurrent)); err != nil {
				ts.frame = 0
			}
		}
		out = append(out, ts)
		p = u64(buf, w.l.tsNext)
	}
	return out, nil
}

// errTorn says a stack changed under the reader: it is retried or skipped,
// never shown half read.
var errTorn = errors.New("the stack changed while it was read")

// frames walks one thread's frames, innermost first. cut says the stack
// was deeper than MaxFrames.
func (w *walker) frames(first uint64) (out []rawFrame, cut bool, err error) {
	if uint64(len(w.fbuf)) < w.l.frameSize {
		w.fbuf = make([]byte, w.l.frameSize)
	}
	buf := w.fbuf[:w.l.frameSize]
	seen := map[uint64]bool{}
	for p := first; p != 0; p = u64(buf, w.l.fBack) {
		if len(out) == MaxFrames {
			return out, true, nil
		}
		if seen[p] {
			return out, false, errTorn
		}
		seen[p] = true
		if err := w.r.read(buf, p); err != nil {
			return out, false, err
		}
		if w.l.fOwner >= 0 && buf[w.l.fOwner] == w.l.ownerCStack {
			continue // an entry shim (3.12+): C calling into the interpreter
		}
		codeAddr := u64(buf, w.l.fCode)
		if w.l.minor >= 13 {
			codeAddr &^= 1 // f_executable is a tagged reference in later builds
		}
		ci, err := w.code(codeAddr)
		if err != nil {
			if w.l.minor >= 13 && errors.Is(err, errNotCode) {
				continue // f_executable holds something other than code (3.13: None for a C frame)
			}
			return out, false, err
		}
		var addr int64
		if w.l.interpFrames {
			instr := u64(buf, w.l.fLasti)
			codeStart := codeAddr + w.l.coCode
			if instr < codeStart {
				addr = -1
			} else {
				addr = int64(instr-codeStart) &^ 1
			}
		} else {
			addr = int64(int32(u32(buf, w.l.fLasti))) * w.l.lastiScale
		}
		out = append(out, rawFrame{code: ci, line: lineFor(w.l.lines, ci.table, ci.first, addr)})
	}
	return out, false, nil
}

var errNotCode = errors.New("not a code object")

// code reads a code object, from the cache when its header still names the
// same strings and table.
func (w *walker) code(addr uint64) (*codeInfo, error) {
	if uint64(len(w.cbuf)) < w.l.codeSize {
		w.cbuf = make([]byte, w.l.codeSize)
	}
	buf := w.cbuf[:w.l.codeSize]
	if err := w.r.read(buf, addr); err != nil {
		return nil, err
	}
	if w.b.codeType != 0 && u64(buf, w.l.obType) != w.b.codeType {
		return nil, fmt.Errorf("%w at %#x", errNotCode, addr)
	}
	fn, name, table := u64(buf, w.l.coFilename), u64(buf, w.l.coName), u64(buf, w.l.coLineTable)
	var qual uint64
	if w.l.coQualname >= 0 {
		qual = u64(buf, uint64(w.l.coQualname))
	}
	first := int(int32(u32(buf, w.l.coFirstLineno)))
	if ci := w.codes[addr]; ci != nil && ci.filename == fn && ci.name == name && ci.qualname == qual && ci.linetab == table && ci.first == first {
		return ci, nil
	}
	ci := &codeInfo{filename: fn, name: name, qualname: qual, linetab: table, first: first}
	var err error
	if ci.File, err = w.str(fn); err != nil {
		return nil, err
	}
	if ci.Function, err = w.str(name); err != nil {
		return nil, err
	}
	if ci.table, err = w.bytes(table); err != nil {
		return nil, err
	}
	size := len(ci.table) + len(ci.File) + len(ci.Function)
	if len(w.codes) >= maxCodeCache || w.cached+size > maxCacheBytes {
		clear(w.codes)
		w.cached = 0
	}
	w.codes[addr] = ci
	w.cached += size
	return ci, nil
}

// str reads a compact str object (code objects' names always are) as
// UTF-8, at most maxStringLen characters.
func (w *walker) str(addr uint64) (string, error) {
	hdr := make([]byte, w.l.compactSize)
	if err := w.r.read(hdr, addr); err != nil {
		return "", err
	}
	if w.b.unicodeTyp != 0 && u64(hdr, w.l.obType) != w.b.unicodeTyp {
		return "", w.layoutErr("a code object's name at %#x is not a str", addr)
	}
	n := int64(u64(hdr, w.l.uniLength))
	state := u32(hdr, w.l.uniState)
	kind, compact, ascii := int(state>>2&7), state>>5&1 == 1, state>>6&1 == 1
	if n < 0 || !compact || (kind != 1 && kind != 2 && kind != 4) {
		return "", w.layoutErr("a str at %#x has length %d, kind %d, compact %v", addr, n, kind, compact)
	}
	cut := n > maxStringLen
	if cut {
		n = maxStringLen
	}
	data := addr + w.l.compactSize
	if ascii {
		data = addr + w.l.asciiSize
	}
	raw := make([]byte, n*int64(kind))
	if err := w.r.read(raw, data); err != nil {
		return "", err
	}
	s := decodeUnicode(raw, kind)
	if cut {
		s += "..."
	}
	return s, nil
}

// decodeUnicode turns PEP 393 data of one kind (1: Latin-1, 2: UCS-2,
// 4: UCS-4) into UTF-8; what is not a character becomes U+FFFD.
func decodeUnicode(raw []byte, kind int) string {
	var sb strings.Builder
	sb.Grow(len(raw))
	for i := 0; i+kind <= len(raw); i += kind {
		var r rune
		switch kind {
		case 1:
			r = rune(raw[i])
		case 2:
			r = rune(uint16(raw[i]) | uint16(raw[i+1])<<8)
		default:
			r = rune(uint32(raw[i]) | uint32(raw[i+1])<<8 | uint32(raw[i+2])<<16 | uint32(raw[i+3])<<24)
		}
		if !utf8.ValidRune(r) {
			r = utf8.RuneError
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// bytes reads a bytes object (a line table), at most maxLineTable bytes.
func (w *walker) bytes(addr uint64) ([]byte, error) {
	var hdr [40]byte
	if err := w.r.read(hdr[:w.l.bytesData], addr); err != nil {
		return nil, err
	}
	if w.b.bytesType != 0 && u64(hdr[:], w.l.obType) != w.b.bytesType {
		return nil, w.layoutErr("a line table at %#x is not bytes", addr)
	}
	n := int64(u64(hdr[:], w.l.bytesSize))
	if n < 0 {
		return nil, w.layoutErr("a line table at %#x has length %d", addr, n)
	}
	n = min(n, maxLineTable)
	out := make([]byte, n)
	if n == 0 {
		return out, nil
	}
	return out, w.r.read(out, addr+w.l.bytesData)
}

// gilHolder is the thread state holding the GIL, 0 when none does or the
// version does not say.
func (w *walker) gilHolder(interp uint64) uint64 {
	switch {
	case w.l.rtTstateCur >= 0:
		// 3.8-3.11: gilstate.tstate_current is the thread state whose
		// thread holds the GIL; NULL while it is released.
		p, err := w.r.ptr(w.b.runtime + uint64(w.l.rtTstateCur))
		if err != nil {
			return 0
		}
		return p
	case w.l.isGILPtr >= 0:
		// 3.12+: the interpreter's gil: locked, and the last holder.
		gil, err := w.r.ptr(interp + uint64(w.l.isGILPtr))
		if err != nil || gil == 0 {
			return 0
		}
		var b [4]byte
		if err := w.r.read(b[:], gil+w.l.gilLocked); err != nil || b == [4]byte{} {
			return 0
		}
		p, _ := w.r.ptr(gil + w.l.gilHolder)
		return p
	}
	return 0
}
