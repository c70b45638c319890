package pysample

import "fmt"

// layout is where the fields the reader follows sit in one CPython minor
// version's structures (x86-64 and other LP64 targets). The offsets come
// from that version's headers, per release tag:
//
//   - _PyRuntimeState: Include/internal/pycore_runtime.h (interpreters.head,
//     main_thread, gilstate.tstate_current up to 3.11, ceval.gil up to 3.11
//     in pycore_ceval_state.h / pycore_gil.h);
//   - PyInterpreterState: Include/internal/pycore_interp.h (next,
//     tstate_head to 3.10, threads.head from 3.11, ceval.gil pointer from
//     3.12);
//   - PyThreadState: Include/cpython/pystate.h (next, interp, frame to
//     3.10, cframe in 3.11 and 3.12, current_frame from 3.13, thread_id,
//     native_thread_id from 3.11);
//   - frames: PyFrameObject in Include/cpython/frameobject.h (3.8, 3.9) and
//     Include/internal/pycore_frame.h... (3.10 keeps PyFrameObject there),
//     _PyInterpreterFrame in Include/internal/pycore_frame.h from 3.11
//     (f_code, previous, prev_instr, owner; f_executable and instr_ptr in
//     3.13), _PyCFrame in Include/cpython/pystate.h (3.11, 3.12);
//   - PyCodeObject: Include/cpython/code.h (co_lnotab to 3.9, co_linetable
//     from 3.10, co_qualname and co_code_adaptive from 3.11);
//   - strings: PyASCIIObject / PyCompactUnicodeObject in
//     Include/cpython/unicodeobject.h (wstr removed in 3.12), PyBytesObject
//     in Include/cpython/bytesobject.h.
//
// Each table was checked field by field against the DWARF of pyenv's builds
// of 3.8.18, 3.9.18, 3.10.13, 3.11.7 and 3.12.1 (`ptype /o`), which is the
// compiler's reading of those same headers. From 3.13 the interpreter
// publishes its own offsets (_Py_DebugOffsets at the start of _PyRuntime,
// Include/internal/pycore_runtime.h in 3.13): the reader takes them from the
// target and uses this table only for what they do not cover.
type layout struct {
	minor int

	// _PyRuntimeState
	rtInterpHead   uint64
	rtMainThread   uint64
	rtTstateCur    int64 // gilstate.tstate_current, -1 from 3.12
	rtGILLocked    int64 // ceval.gil.locked up to 3.11, -1 after
	rtGILLastHoldr int64 // ceval.gil.last_holder up to 3.11

	// PyInterpreterState
	isNext        uint64
	isThreadsHead uint64
	isGILPtr      int64 // ceval.gil (a pointer) from 3.12, -1 before
	gilLocked     uint64
	gilHolder     uint64

	// PyThreadState
	tsNext     uint64
	tsInterp   uint64
	tsThreadID uint64
	tsNativeID int64 // -1 before 3.11
	tsFrame    uint64
	// cfCurrent is _PyCFrame.current_frame (3.11, 3.12); -1 when the
	// thread state points at the frame itself.
	cfCurrent int64

	// frames
	interpFrames bool // _PyInterpreterFrame (3.11+) rather than PyFrameObject
	fBack        uint64
	fCode        uint64
	fLasti       uint64 // PyFrameObject.f_lasti (int) or _PyInterpreterFrame.prev_instr/instr_ptr
	lastiScale   int64  // f_lasti to a byte offset: 1 (3.8, 3.9: bytes), 2 (3.10: instructions)
	fOwner       int64  // _PyInterpreterFrame.owner (char), -1 in 3.11 (no shim frames)
	ownerCStack  byte   // FRAME_OWNED_BY_CSTACK: entry shim frames, not Python code
	frameSize    uint64 // bytes read of one frame

	// PyCodeObject
	coFilename    uint64
	coName        uint64
	coQualname    int64 // -1 before 3.11
	coFirstLineno uint64
	coLineTable   uint64 // co_lnotab (3.8, 3.9) or co_linetable
	coCode        uint64 // co_code_adaptive (3.11+); 0 before
	codeSize      uint64 // bytes read of a code object
	lines         lineFormat

	// strings
	uniLength   uint64
	uniState    uint64
	asciiSize   uint64 // sizeof(PyASCIIObject): where compact ASCII data starts
	compactSize uint64 // sizeof(PyCompactUnicodeObject)
	bytesSize   uint64 // PyVarObject.ob_size
	bytesData   uint64 // PyBytesObject.ob_sval
	obType      uint64
}

// lineFormat is how a code object maps bytecode offsets to lines.
type lineFormat int

const (
	lnotab    lineFormat = iota // co_lnotab, 3.8 and 3.9 (Objects/lnotab_notes.txt)
	linetable                   // co_linetable, 3.10 (Objects/lnotab_notes.txt of 3.10)
	locations                   // co_linetable location table, 3.11+ (Objects/locations.md)
)

// base fields shared by every version: PyObject's ob_type, PyVarObject's
// ob_size and the string headers' first fields do not move.
func base(minor int) layout {
	return layout{minor: minor, obType: 8, bytesSize: 16, bytesData: 32, uniLength: 16, uniState: 32,
		asciiSize: 48, compactSize: 72, isNext: 0, tsNext: 8, tsInterp: 16, rtTstateCur: -1, rtGILLocked: -1,
		rtGILLastHoldr: -1, isGILPtr: -1, tsNativeID: -1, cfCurrent: -1, fOwner: -1, coQualname: -1}
}

// layoutFor returns the table for 3.minor, or an error naming the version.
// 3.13 is completed from the target's _Py_DebugOffsets (debugoffsets.go).
func layoutFor(major, minor int) (layout, error) {
	l := base(minor)
	switch {
	case major != 3:
	case minor == 8 || minor == 9:
		// 3.8 and 3.9 differ only in _PyRuntimeState's size before gilstate.
		l.rtInterpHead, l.rtMainThread = 32, 72
		if minor == 8 {
			l.rtGILLastHoldr, l.rtGILLocked, l.rtTstateCur = 1160, 1168, 1368
		} else {
			l.rtGILLastHoldr, l.rtGILLocked, l.rtTstateCur = 360, 368, 568
		}
		l.isThreadsHead = 8
		l.tsFrame, l.tsThreadID = 24, 176
		l.fBack, l.fCode, l.fLasti, l.lastiScale, l.frameSize = 24, 32, 104, 1, 112
		l.coFirstLineno, l.coFilename, l.coName, l.coLineTable, l.codeSize = 40, 104, 112, 120, 128
		l.lines = lnotab
		return l, nil
	case minor == 10:
		l.rtInterpHead, l.rtMainThread = 32, 72
		l.rtGILLastHoldr, l.rtGILLocked, l.rtTstateCur = 360, 368, 568
		l.isThreadsHead = 8
		l.tsFrame, l.tsThreadID = 24, 176
		l.fBack, l.fCode, l.fLasti, l.lastiScale, l.frameSize = 24, 32, 96, 2, 104
		l.coFirstLineno, l.coFilename, l.coName, l.coLineTable, l.codeSize = 40, 104, 112, 120, 128
		l.lines = linetable
		return l, nil
	case minor == 11:
		l.rtInterpHead, l.rtMainThread = 40, 80
		l.rtGILLastHoldr, l.rtGILLocked, l.rtTstateCur = 368, 376, 576
		l.isThreadsHead = 16
		l.tsFrame, l.cfCurrent, l.tsThreadID, l.tsNativeID = 56, 8, 152, 160
		l.interpFrames = true
		l.fCode, l.fBack, l.fLasti, l.frameSize = 32, 48, 56, 72
		l.coFirstLineno, l.coFilename, l.coName, l.coQualname, l.coLineTable, l.coCode, l.codeSize = 72, 112, 120, 128, 136, 184, 184
		l.lines = locations
		return l, nil
	case minor == 12:
		l.rtInterpHead, l.rtMainThread = 40, 64
		l.isThreadsHead, l.isGILPtr, l.gilHolder, l.gilLocked = 72, 384, 8, 16
		l.tsFrame, l.cfCurrent, l.tsThreadID, l.tsNativeID = 56, 0, 136, 144
		l.interpFrames = true
		l.fCode, l.fBack, l.fLasti, l.fOwner, l.ownerCStack, l.frameSize = 0, 8, 56, 70, 3, 72
		l.coFirstLineno, l.coFilename, l.coName, l.coQualname, l.coLineTable, l.coCode, l.codeSize = 68, 112, 120, 128, 136, 192, 192
		l.lines = locations
		l.asciiSize, l.compactSize = 40, 56
		return l, nil
	case minor == 13:
		// Filled from _Py_DebugOffsets; what it does not carry:
		// FRAME_OWNED_BY_CSTACK (Include/internal/pycore_frame.h, 3.13) and
		// PyCompactUnicodeObject's size (Include/cpython/unicodeobject.h).
		l.interpFrames = true
		l.ownerCStack = 3
		l.lines = locations
		l.asciiSize, l.compactSize = 40, 56
		return l, nil
	}
	return layout{}, &LayoutError{Version: fmt.Sprintf("%d.%d", major, minor)}
}

// LayoutError says the interpreter's structures are not known to the
// reader (or did not hold what they should): no stack is shown rather than
// a wrong one.
type LayoutError struct {
	Version string
	Why     string
}

func (e *LayoutError) Error() string {
	s := "not readable: CPython " + e.Version + " layout unknown"
	if e.Why != "" {
		s += " (" + e.Why + ")"
	}
	return s
}
