package kineto

import (
	"bytes"
	"strconv"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// category is an event's "cat", reduced to what the model distinguishes.
type category uint8

const (
	catOther category = iota
	catKernel
	catMemcpy
	catMemset
	catRuntime
	catCPUOp
	catAnnotation
	catPython
	catGPUSync
	catTraceSpan
	// catMTIAOp is an MTIA device operation (mtia_ccp_events): a kernel, a
	// DMA request or a synchronisation record, told apart by its name.
	catMTIAOp
)

func classifyCat(c []byte) category {
	switch string(c) {
	case "kernel", "Kernel":
		return catKernel
	case "gpu_memcpy", "Memcpy":
		return catMemcpy
	case "gpu_memset", "Memset":
		return catMemset
	case "cuda_runtime", "cuda_driver", "Runtime", "Driver", "hip_runtime", "hip_driver", "mtia_runtime":
		return catRuntime
	case "mtia_ccp_events":
		return catMTIAOp
	case "cpu_op", "Operator":
		return catCPUOp
	case "user_annotation", "Annotation":
		return catAnnotation
	case "python_function":
		return catPython
	case "cuda_sync":
		return catGPUSync
	case "Trace":
		return catTraceSpan
	}
	return catOther
}

// threadID names a thread inside one chunk before it is interned globally.
type threadID struct {
	pid, tid int64
	label    string
}

type threadName struct {
	thread uint32
	name   string
}

// batch is what one chunk of events decodes to, with chunk-local name,
// thread and stream tables; the coordinator remaps them to the trace's.
type batch struct {
	names     []string
	nameIdx   map[string]uint32
	threads   []threadID
	threadIdx map[threadID]uint32
	streams   []trace.Stream
	streamIdx map[trace.Stream]uint32

	gpu     []trace.GPUOp
	runtime []trace.RuntimeCall
	cpu     []trace.CPUOp
	tnames  []threadName

	counts trace.Counts
	// firstBadTime is the position of the first event dropped for a bad
	// time, -1 when none.
	firstBadTime int
	badTimeWhat  string
	// firstNoPhase is the position of the first event without "ph", -1
	// when none.
	firstNoPhase int
	// eventPos is where the event being added starts in the chunk.
	eventPos int

	profStart, profEnd int64

	scratch []byte
}

func newBatch() *batch {
	return &batch{
		nameIdx:      make(map[string]uint32),
		threadIdx:    make(map[threadID]uint32),
		streamIdx:    make(map[trace.Stream]uint32),
		firstBadTime: -1,
		firstNoPhase: -1,
	}
}

// sized returns a batch whose record slices have room for what the
// previous batch held (chunks are alike), to avoid regrowing them.
func sized(prev *batch) *batch {
	bt := newBatch()
	if prev != nil {
		bt.gpu = make([]trace.GPUOp, 0, len(prev.gpu)+len(prev.gpu)/8)
		bt.runtime = make([]trace.RuntimeCall, 0, len(prev.runtime)+len(prev.runtime)/8)
		bt.cpu = make([]trace.CPUOp, 0, len(prev.cpu)+len(prev.cpu)/8)
	}
	return bt
}

func (bt *batch) name(raw []byte, escaped bool) uint32 {
	if escaped {
		bt.scratch = unescape(bt.scratch[:0], raw)
		raw = bt.scratch
	}
	if id, ok := bt.nameIdx[string(raw)]; ok {
		return id
	}
	s := string(raw)
	id := uint32(len(bt.names))
	bt.names = append(bt.names, s)
	bt.nameIdx[s] = id
	return id
}

func (bt *batch) thread(k threadID) uint32 {
	if id, ok := bt.threadIdx[k]; ok {
		return id
	}
	id := uint32(len(bt.threads))
	bt.threads = append(bt.threads, k)
	bt.threadIdx[k] = id
	return id
}

func (bt *batch) stream(dev int32, s int64) uint32 {
	k := trace.Stream{Device: dev, ID: s}
	if id, ok := bt.streamIdx[k]; ok {
		return id
	}
	id := uint32(len(bt.streams))
	bt.streams = append(bt.streams, k)
	bt.streamIdx[k] = id
	return id
}

// idToken is a pid or tid as written: a number or a string.
type idToken struct {
	raw   []byte
	isStr bool
	set   bool
}

func (t idToken) number() (int64, bool) {
	if !t.set || t.isStr {
		return 0, false
	}
	return parseInt(t.raw)
}

func (t idToken) text() string {
	if !t.set {
		return ""
	}
	if t.isStr && bytes.IndexByte(t.raw, '\\') >= 0 {
		return string(unescape(nil, t.raw))
	}
	return string(t.raw)
}

// threadOf builds the thread key of an event from its pid and tid.
func threadOf(pid, tid idToken) threadID {
	p, pok := pid.number()
	t, tok := tid.number()
	if pok && tok {
		return threadID{pid: p, tid: t}
	}
	return threadID{label: pid.text() + "/" + tid.text()}
}

// event holds the fields of one event while it is being read.
type event struct {
	ph             byte
	cat            category
	name           []byte
	nameEsc        bool
	pid, tid       idToken
	ts, dur        int64
	tsKind         numKind
	durKind        numKind
	hasTs, hasDur  bool
	corr           int64
	stream, device int64
	hasStream      bool
	hasDevice      bool
	bytes          int64
	blocksPerSM    float64
	// copyDir and size are an MTIA DMA request's "direction" and "size" arguments.
	copyDir    trace.CopyKind
	size       int64
	argName    []byte
	argNameEsc bool
}

// parseEvent reads the event object at b[i] == '{' into bt and returns the
// position after it.
func parseEvent(b []byte, i int, bt *batch) (int, error) {
	var ev event
	i++ // '{'
	first := true
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, errShort
		}
		if b[i] == '}' {
			i++
			break
		}
		if !first {
			if b[i] != ',' {
				return i, errAt(i, "expected ',' or '}' in an event")
			}
			i = skipSpace(b, i+1)
			if i >= len(b) {
				return i, errShort
			}
			if b[i] == '}' {
				i++
				break
			}
		}
		first = false
		if b[i] != '"' {
			return i, errAt(i, "expected a quoted key in an event")
		}
		key, _, next, err := readString(b, i)
		if err != nil {
			return next, err
		}
		i = skipSpace(b, next)
		if i >= len(b) {
			return i, errShort
		}
		if b[i] != ':' {
			return i, errAt(i, "expected ':' after a key")
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return i, errShort
		}
		i, err = ev.field(b, i, key)
		if err != nil {
			return i, err
		}
	}
	bt.add(&ev)
	return i, nil
}

// field reads the value of key at b[i].
func (ev *event) field(b []byte, i int, key []byte) (int, error) {
	switch string(key) {
	case "ph":
		if b[i] != '"' {
			return skipValue(b, i)
		}
		raw, _, next, err := readString(b, i)
		if err == nil && len(raw) > 0 {
			ev.ph = raw[0]
		}
		return next, err
	case "cat":
		if b[i] != '"' {
			return skipValue(b, i)
		}
		raw, _, next, err := readString(b, i)
		if err == nil {
			ev.cat = classifyCat(raw)
		}
		return next, err
	case "name":
		if b[i] != '"' {
			return skipValue(b, i)
		}
		raw, esc, next, err := readString(b, i)
		ev.name, ev.nameEsc = raw, esc
		return next, err
	case "pid", "tid":
		var tok idToken
		var next int
		var err error
		if b[i] == '"' {
			tok.raw, _, next, err = readString(b, i)
			tok.isStr = true
		} else {
			next, err = skipValue(b, i)
			if err == nil {
				tok.raw = b[i:next]
			}
		}
		tok.set = true
		if key[0] == 'p' {
			ev.pid = tok
		} else {
			ev.tid = tok
		}
		return next, err
	case "ts", "dur":
		next, err := skipValue(b, i)
		if err != nil {
			return next, err
		}
		tok := b[i:next]
		if b[i] == '"' { // a quoted number: read what it holds
			tok = tok[1 : len(tok)-1]
		}
		v, k := parseMicrosAsNanos(tok)
		if key[0] == 't' {
			ev.ts, ev.tsKind, ev.hasTs = v, k, true
		} else {
			ev.dur, ev.durKind, ev.hasDur = v, k, true
		}
		return next, nil
	case "args":
		if b[i] != '{' {
			return skipValue(b, i)
		}
		return ev.args(b, i)
	}
	return skipValue(b, i)
}

// args reads the args object at b[i] == '{', keeping the keys the model uses.
func (ev *event) args(b []byte, i int) (int, error) {
	i++
	first := true
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, errShort
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if !first {
			if b[i] != ',' {
				return i, errAt(i, "expected ',' or '}' in args")
			}
			i = skipSpace(b, i+1)
			if i >= len(b) {
				return i, errShort
			}
			if b[i] == '}' {
				return i + 1, nil
			}
		}
		first = false
		if b[i] != '"' {
			return i, errAt(i, "expected a quoted key in args")
		}
		key, _, next, err := readString(b, i)
		if err != nil {
			return next, err
		}
		i = skipSpace(b, next)
		if i >= len(b) {
			return i, errShort
		}
		if b[i] != ':' {
			return i, errAt(i, "expected ':' after a key in args")
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return i, errShort
		}
		start := i
		if b[i] == '"' && len(key) == 4 && string(key) == "name" {
			raw, esc, next, err := readString(b, i)
			if err != nil {
				return next, err
			}
			ev.argName, ev.argNameEsc = raw, esc
			i = next
			continue
		}
		if b[i] == '"' && string(key) == "direction" {
			raw, _, next, err := readString(b, i)
			if err != nil {
				return next, err
			}
			ev.copyDir = trace.ParseMTIADirection(string(raw))
			i = next
			continue
		}
		i, err = skipValue(b, i)
		if err != nil {
			return i, err
		}
		if b[start] == '"' || b[start] == '{' || b[start] == '[' {
			continue
		}
		tok := b[start:i]
		switch string(key) {
		case "correlation":
			ev.corr, _ = parseInt(tok)
		case "stream":
			if v, ok := parseInt(tok); ok {
				ev.stream, ev.hasStream = v, true
			}
		case "device":
			if v, ok := parseInt(tok); ok {
				ev.device, ev.hasDevice = v, true
			}
		case "bytes":
			ev.bytes, _ = parseInt(tok)
		case "size":
			ev.size, _ = parseInt(tok)
		case "blocks per SM":
			ev.blocksPerSM, _ = parseFloat(tok)
		}
	}
}

// add turns a parsed event into a record of the batch.
func (bt *batch) add(ev *event) {
	bt.counts.Events++
	switch ev.ph {
	case 'X':
	case 'M':
		bt.counts.Metadata++
		if string(ev.name) == "thread_name" && ev.argName != nil {
			th := bt.thread(threadOf(ev.pid, ev.tid))
			bt.tnames = append(bt.tnames, threadName{th, string(unescapeIf(ev.argName, ev.argNameEsc))})
		}
		return
	case 's', 'f', 't':
		bt.counts.Flows++
		return
	case 'i', 'I', 'n', 'R':
		bt.counts.Instants++
		return
	case 0:
		bt.counts.NoPhase++
		if bt.firstNoPhase < 0 {
			bt.firstNoPhase = bt.eventPos
		}
		return
	default:
		bt.counts.Ignored++
		return
	}
	if ev.cat == catOther {
		bt.counts.Ignored++
		return
	}
	if !ev.hasDur {
		ev.dur, ev.durKind = 0, numOK
	}
	if !ev.hasTs || ev.tsKind != numOK || ev.durKind != numOK || ev.ts < 0 || ev.dur < 0 || ev.ts > maxTime-ev.dur {
		bt.badTime(ev)
		return
	}
	start, end := ev.ts, ev.ts+ev.dur
	switch ev.cat {
	case catTraceSpan:
		if bt.profStart == 0 || start < bt.profStart {
			bt.profStart = start
		}
		if end > bt.profEnd {
			bt.profEnd = end
		}
		bt.counts.Ignored++
	case catKernel, catMemcpy, catMemset, catGPUSync, catMTIAOp:
		dev, stream := ev.device, ev.stream
		if !ev.hasDevice {
			dev, _ = ev.pid.number()
		}
		switch {
		case ev.hasStream:
		case ev.cat == catMTIAOp:
			// An MTIA operation without a stream argument (DMA requests
			// outside any queue) is device work on no stream, as HTA reads it.
			stream = -1
		default:
			stream = streamFromTid(ev.tid)
		}
		op := trace.GPUOp{
			Start:  start,
			End:    end,
			Corr:   ev.corr,
			Bytes:  ev.bytes,
			Name:   trace.NameID(bt.name(ev.name, ev.nameEsc)),
			Stream: bt.stream(int32(dev), stream),
		}
		switch ev.cat {
		case catKernel:
			op.Kind = trace.Kernel
			op.BlocksPerSM = float32(ev.blocksPerSM)
		case catMemcpy:
			op.Kind = trace.Memcpy
		case catMemset:
			op.Kind = trace.Memset
		case catMTIAOp:
			op.Kind = trace.ClassifyMTIAOp(bt.names[op.Name])
			op.Copy = ev.copyDir
			if op.Bytes == 0 {
				op.Bytes = ev.size
			}
		default:
			op.Kind = trace.GPUSync
		}
		bt.gpu = append(bt.gpu, op)
	case catRuntime:
		bt.runtime = append(bt.runtime, trace.RuntimeCall{
			Start:  start,
			End:    end,
			Corr:   ev.corr,
			Name:   trace.NameID(bt.name(ev.name, ev.nameEsc)),
			Thread: bt.thread(threadOf(ev.pid, ev.tid)),
		})
	case catCPUOp, catAnnotation, catPython:
		kind := trace.Operator
		switch ev.cat {
		case catAnnotation:
			kind = trace.Annotation
		case catPython:
			kind = trace.PythonFunction
		}
		bt.cpu = append(bt.cpu, trace.CPUOp{
			Start:  start,
			End:    end,
			Name:   trace.NameID(bt.name(ev.name, ev.nameEsc)),
			Thread: bt.thread(threadOf(ev.pid, ev.tid)),
			Kind:   kind,
		})
	}
}

// maxTime bounds end times so that ts+dur cannot overflow.
const maxTime = int64(1) << 62

// badTime counts an event dropped for its time and remembers the first.
func (bt *batch) badTime(ev *event) {
	bt.counts.BadTime++
	if bt.firstBadTime >= 0 {
		return
	}
	bt.firstBadTime = bt.eventPos
	switch {
	case !ev.hasTs:
		bt.badTimeWhat = "no ts"
	case ev.tsKind == numNaN || ev.durKind == numNaN:
		bt.badTimeWhat = "NaN"
	case ev.tsKind == numInf || ev.durKind == numInf:
		bt.badTimeWhat = "infinite or out-of-range"
	case ev.tsKind == numBad || ev.durKind == numBad:
		bt.badTimeWhat = "unreadable"
	case ev.ts < 0:
		bt.badTimeWhat = "negative ts"
	case ev.dur < 0:
		bt.badTimeWhat = "negative duration"
	default:
		bt.badTimeWhat = "out-of-range"
	}
}

func unescapeIf(raw []byte, esc bool) []byte {
	if !esc {
		return raw
	}
	return unescape(nil, raw)
}

// streamFromTid reads the stream from a GPU event's tid when args lack it:
// a number (7) or older Kineto's "stream 7".
func streamFromTid(t idToken) int64 {
	if v, ok := t.number(); ok {
		return v
	}
	s := t.text()
	for i := len(s); i > 0; i-- {
		if s[i-1] < '0' || s[i-1] > '9' {
			if v, err := strconv.ParseInt(s[i:], 10, 64); err == nil {
				return v
			}
			return -1
		}
	}
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}
