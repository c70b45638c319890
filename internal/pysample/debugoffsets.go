package pysample

import (
	"encoding/binary"
	"fmt"
)

// _Py_DebugOffsets, 3.13 (Include/internal/pycore_runtime.h of v3.13.0):
// the first member of _PyRuntime, written by the interpreter itself so
// that out-of-process tools need not know its structures. Each group
// starts with its structure's size; the positions below are those of the
// 3.13 declaration (cookie[8], version, free_threaded, then the groups).
const (
	doCookie           = 0
	doVersion          = 8
	doFreeThreaded     = 16
	doRtInterpHead     = 40
	doIsNext           = 64
	doIsThreadsHead    = 72
	doIsCevalGIL       = 112
	doIsGILState       = 120
	doIsGILLocked      = 136
	doIsGILHolder      = 144
	doTsNext           = 168
	doTsInterp         = 176
	doTsCurrentFrame   = 184
	doTsThreadID       = 192
	doTsNativeThreadID = 200
	doIfSize           = 224
	doIfPrevious       = 232
	doIfExecutable     = 240
	doIfInstrPtr       = 248
	doIfOwner          = 264
	doCoSize           = 272
	doCoFilename       = 280
	doCoName           = 288
	doCoQualname       = 296
	doCoLinetable      = 304
	doCoFirstlineno    = 312
	doCoCodeAdaptive   = 344
	doObType           = 360
	doBytesObSize      = 520
	doBytesObSval      = 528
	doUniState         = 544
	doUniLength        = 552
	doUniASCIISize     = 560
	doSize             = 584
)

// debugCookie opens _Py_DebugOffsets.
const debugCookie = "xdebugpy"

// maxOffset bounds any offset taken from the target: CPython's structures
// are a few KiB; an offset beyond this is not one.
const maxOffset = 1 << 16

// fromDebugOffsets completes l from the target's _Py_DebugOffsets. The
// cookie, the version (PY_VERSION_HEX's major and minor) and the bounds of
// every offset are checked: a mismatch is a layout error, never a guess.
func fromDebugOffsets(l *layout, b []byte, major, minor int) error {
	if len(b) < doSize || string(b[:8]) != debugCookie {
		return &LayoutError{Version: fmt.Sprintf("%d.%d", major, minor), Why: "no _Py_DebugOffsets cookie at _PyRuntime"}
	}
	v := binary.LittleEndian.Uint64(b[doVersion:])
	if int(v>>24) != major || int(v>>16&0xff) != minor {
		return &LayoutError{Version: fmt.Sprintf("%d.%d", major, minor), Why: fmt.Sprintf("_Py_DebugOffsets says version %#x", v)}
	}
	if binary.LittleEndian.Uint64(b[doFreeThreaded:]) != 0 {
		return &LayoutError{Version: fmt.Sprintf("%d.%dt", major, minor), Why: "free-threaded build"}
	}
	get := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
	fields := []struct {
		dst *uint64
		off int
	}{
		{&l.rtInterpHead, doRtInterpHead}, {&l.isNext, doIsNext}, {&l.isThreadsHead, doIsThreadsHead},
		{&l.tsNext, doTsNext}, {&l.tsInterp, doTsInterp}, {&l.tsFrame, doTsCurrentFrame}, {&l.tsThreadID, doTsThreadID},
		{&l.fBack, doIfPrevious}, {&l.fCode, doIfExecutable}, {&l.fLasti, doIfInstrPtr}, {&l.frameSize, doIfSize},
		{&l.coFilename, doCoFilename}, {&l.coName, doCoName}, {&l.coLineTable, doCoLinetable},
		{&l.coFirstLineno, doCoFirstlineno}, {&l.coCode, doCoCodeAdaptive}, {&l.obType, doObType},
		{&l.bytesSize, doBytesObSize}, {&l.bytesData, doBytesObSval}, {&l.uniState, doUniState},
		{&l.uniLength, doUniLength}, {&l.asciiSize, doUniASCIISize}, {&l.gilLocked, doIsGILLocked}, {&l.gilHolder, doIsGILHolder},
	}
	for _, f := range fields {
		x := get(f.off)
		if x >= maxOffset {
			return &LayoutError{Version: fmt.Sprintf("%d.%d", major, minor), Why: fmt.Sprintf("_Py_DebugOffsets holds an offset of %#x", x)}
		}
		*f.dst = x
	}
	owner, qual, native, gil, gilState := get(doIfOwner), get(doCoQualname), get(doTsNativeThreadID), get(doIsCevalGIL), get(doIsGILState)
	if owner >= maxOffset || qual >= maxOffset || native >= maxOffset || gil >= maxOffset || gilState >= maxOffset ||
		l.gilLocked < gilState || l.gilHolder < gilState {
		return &LayoutError{Version: fmt.Sprintf("%d.%d", major, minor), Why: "_Py_DebugOffsets holds an offset out of range"}
	}
	l.fOwner, l.coQualname, l.tsNativeID, l.isGILPtr = int64(owner), int64(qual), int64(native), int64(gil)
	// The GIL fields are given within the interpreter's own _gil; the
	// reader follows ceval.gil (which may point to the main interpreter's)
	// and reads them relative to it.
	l.gilLocked -= gilState
	l.gilHolder -= gilState
	l.codeSize = 0
	return nil
}
