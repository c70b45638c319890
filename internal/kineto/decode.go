// Package kineto decodes PyTorch profiler (Kineto) Chrome-trace JSON into the
// trace event model, streaming: the file is never held whole.
//
// The header (everything before "traceEvents") and the tail are read
// sequentially. The events array is cut into chunks at likely event
// boundaries and the chunks are decoded in parallel, each into its own
// batch; batches are merged in file order. A cut that turns out not to be a
// boundary (it fell inside a string) is detected — the chunk before it ends
// with an unfinished event — and the two chunks are re-read as one.
//
// Timestamps are microseconds written in decimal; they are read exactly and
// kept as integer nanoseconds. NaN and infinite times drop the event (counted
// and warned about with the byte offset of the first). A file cut short (a
// crash before the closing bracket) yields the events it holds and a warning
// with the offset where it ends.
package kineto

import (
	"github.com/gpufeed/gpufeed/internal/safetext"
	"time"

	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// Options tune the decoder; the zero value is the default.
type Options struct {
	// Workers decode chunks in parallel; 0 means GOMAXPROCS.
	Workers int
	// ChunkBytes is the size of one chunk; 0 picks 2 MiB, less when many
	// workers would push the buffers past memoryBudget.
	ChunkBytes int
	// SizeHint is the size of the (uncompressed) JSON when the caller knows
	// it; it only sizes memory. DecodeFile fills it in.
	SizeHint int64
}

const (
	defaultChunk = 2 << 20
	minChunk     = 64 << 10
	// memoryBudget bounds the chunk buffers in flight (each chunk's bytes and
	// its decoded batch), so the decoder stays within 128 MiB whatever the
	// file size.
	memoryBudget = 96 << 20
	// maxEvent bounds a single event (or metadata value); larger means the
	// file is not a trace.
	maxEvent = 64 << 20
)

// SyntaxError is malformed JSON: the file, the byte offset in the
// (decompressed) JSON text, and what was expected there.
type SyntaxError struct {
	File   string
	Offset int64
	Msg    string
	// Near quotes the bytes at the offset.
	Near string
}

func (e *SyntaxError) Error() string {
	if e.Near != "" {
		return fmt.Sprintf("%s: byte offset %d: %s (near %q)", e.File, e.Offset, e.Msg, e.Near)
	}
	return fmt.Sprintf("%s: byte offset %d: %s", e.File, e.Offset, e.Msg)
}

// NotTraceError is input that is well-formed enough to read but is not a
// Chrome trace: a JSON object without traceEvents. What says what the file
// looks like instead, when that can be told.
type NotTraceError struct {
	File string
	What string
}

func (e *NotTraceError) Error() string {
	return fmt.Sprintf("%s: not a Chrome trace: %s", e.File, e.What)
}

// recordingFormat is the "format" value that starts a gpufeed recording
// (internal/timeline's FormatName; a test keeps them equal).
const recordingFormat = "gpufeed-timeline"

// maxKeysShown bounds the top-level keys a NotTraceError quotes.
const maxKeysShown = 5

// notTrace describes a top-level object that ended without traceEvents.
func (d *decoder) notTrace() error {
	e := &NotTraceError{File: d.name}
	switch {
	case d.meta.format == recordingFormat:
		e.What = "this is a gpufeed recording; judge it with: gpufeed report " + d.name
	case len(d.meta.keys) == 0:
		e.What = `an empty JSON object ({}); a trace is an object with a "traceEvents" array (PyTorch profiler: prof.export_chrome_trace(path)) or a JSON array of events`
	default:
		q := make([]string, len(d.meta.keys))
		for i, k := range d.meta.keys {
			q[i] = strconv.Quote(k)
		}
		more := ""
		if d.meta.moreKeys > 0 {
			more = fmt.Sprintf(" and %d more", d.meta.moreKeys)
		}
		e.What = fmt.Sprintf(`a JSON object with no "traceEvents" array (its keys: %s%s); a trace is an object with "traceEvents" (PyTorch profiler: prof.export_chrome_trace(path)) or a JSON array of events`,
			strings.Join(q, ", "), more)
	}
	return e
}

// DecodeFile decodes the Kineto trace at path, plain JSON or gzip-compressed
// (recognised by its magic bytes, not its name).
func DecodeFile(path string, opt Options) (*trace.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if opt.SizeHint == 0 {
		opt.SizeHint = SizeHint(f)
	}
	return Decode(f, path, opt)
}

// probeBytes is how much of a gzip file SizeHint decompresses: a few
// milliseconds, enough to see the compression ratio.
const probeBytes = 256 << 10

// SizeHint estimates how many bytes of JSON the open file f holds, to size
// memory ahead (never to limit what is read); 0 when it cannot tell (a pipe).
// Plain JSON: the file size. Gzip: the first probeBytes are decompressed;
// when that is the whole file, the answer is exact — the size gzip's
// trailer (ISIZE) gives when the stream ends cleanly, what the stream holds
// when it is cut short. For a larger file the probe's compression ratio is
// extrapolated over the file, and ISIZE is used only when it agrees with
// that within a quarter: a file cut short ends in deflate data, not in a
// trailer, so its last four bytes are any number up to 4 GiB (a 709 KB cut
// of a 15 MB trace claimed 0.97 GB), and ISIZE is the size modulo 4 GiB
// anyway. f's read offset is not moved.
func SizeHint(f *os.File) int64 {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	size := st.Size()
	var magic [2]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil || magic != [2]byte{0x1f, 0x8b} {
		return size
	}
	cr := &countingReader{br: bufio.NewReaderSize(io.NewSectionReader(f, 0, min(size, probeBytes)), 32<<10)}
	zr, err := gzip.NewReader(cr)
	if err != nil {
		return size
	}
	n, _ := io.Copy(io.Discard, zr)
	if size <= probeBytes || cr.n == 0 {
		// The whole file was read: it holds n bytes, whether the stream
		// ended cleanly (gzip checked them against ISIZE) or not.
		return n
	}
	est := int64(float64(n) * float64(size) / float64(cr.n))
	var trailer [4]byte
	if _, err := f.ReadAt(trailer[:], size-4); err == nil {
		isize := int64(trailer[0]) | int64(trailer[1])<<8 | int64(trailer[2])<<16 | int64(trailer[3])<<24
		if float64(isize) >= 0.75*float64(est) && float64(isize) <= 1.25*float64(est) {
			return isize
		}
	}
	return est
}

// countingReader counts the bytes a gzip reader takes from it. It is an
// io.ByteReader, so the decompressor reads exactly what it consumes.
type countingReader struct {
	br *bufio.Reader
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.br.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.br.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// Decode decodes a Kineto trace from r; name labels errors and warnings.
func Decode(r io.Reader, name string, opt Options) (*trace.Trace, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(2)
	var src io.Reader = br
	compressed := len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	if compressed {
		zr, err := gzip.NewReader(br)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%s: the file ends inside its gzip header (a truncated file): %w", name, io.ErrUnexpectedEOF)
			}
			// The gzip package's errors say "gzip:" themselves.
			return nil, fmt.Errorf("%s: starts with gzip's magic bytes but is not a gzip stream: %w", name, err)
		}
		defer zr.Close()
		src = zr
	}
	d := &decoder{
		name:       name,
		compressed: compressed,
		b:          trace.NewBuilder(name, "kineto"),
		opt:        opt,
		sizeHint:   opt.SizeHint,
	}
	if err := d.run(src); err != nil {
		return nil, err
	}
	return d.finish(), nil
}

type decoder struct {
	name        string
	compressed  bool
	arrayFormat bool
	b           *trace.Builder
	opt         Options

	meta rawMeta

	// Per-name classification caches, indexed by NameID.
	runtimeKind []int16
	cpuKind     []int16
	copyKind    []copyKinds
	haveCopy    []bool

	bytesRead int64
	// sizeHint is the size of the whole JSON when known (0 otherwise).
	sizeHint     int64
	firstBadTime int64
	badTimeWhat  string
	badTimes     int64
	firstNoPhase int64
	noPhase      int64
	profStart    int64
	profEnd      int64
}

type copyKinds struct {
	dir      trace.CopyKind
	src, dst trace.MemKind
}

// rawMeta holds the top-level keys the model uses.
type rawMeta struct {
	schemaVersion   string
	distributedInfo []byte
	deviceProps     []byte
	displayTimeUnit string
	baseTimeNs      int64
	sawEvents       bool
	// format is a top-level "format" string (a gpufeed recording's header
	// has one); keys are the first top-level keys seen, for messages.
	format   string
	keys     []string
	moreKeys int
}

func (d *decoder) syntax(off int64, msg string, data []byte, pos int) error {
	e := &SyntaxError{File: d.name, Offset: off, Msg: msg}
	if data != nil && pos >= 0 && pos <= len(data) {
		end := min(pos+24, len(data))
		e.Near = string(data[pos:end])
	}
	if d.compressed {
		e.Msg += " (offset in the decompressed JSON)"
	}
	return e
}

// isTruncation reports a gzip stream that ends early: treated as a truncated
// trace (warning), not a failure.
func isTruncation(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF)
}

func (d *decoder) run(src io.Reader) error {
	w := &window{r: src}
	inArray, err := d.header(w)
	if err != nil {
		return err
	}
	if !inArray {
		return nil
	}
	d.meta.sawEvents = true
	carry := w.buf[w.pos:]
	off := w.base + int64(w.pos)
	tail, tailOff, err := d.events(src, carry, off, w.eof)
	if err != nil {
		return err
	}
	if tail == nil {
		return nil
	}
	end := 0
	if !d.arrayFormat {
		var closed bool
		if end, closed, err = d.tail(tail, tailOff); !closed || err != nil {
			return err
		}
	}
	return d.trailing(tail, tailOff, end)
}

// trailing checks that nothing but whitespace follows the trace's top-level
// value (b[i:], at offset off). A trace that held events keeps them, with a
// warning; one without events was not what the file is, so that is an
// error.
func (d *decoder) trailing(b []byte, off int64, i int) error {
	j := skipSpace(b, i)
	if j >= len(b) {
		return nil
	}
	if d.b.Trace().Counts.Events == 0 {
		return d.syntax(off+int64(j), "expected the end of the file after the end of the trace (which holds no events)", b, j)
	}
	near := b[j:min(j+24, len(b))]
	d.b.Warnf("%s: byte offset %d: data after the end of the trace (near %q), ignored; the events before it are kept", d.name, off+int64(j), near)
	return nil
}

// header reads the top level up to the start of the traceEvents array.
// It reports whether the array was found (false: an object without events).
func (d *decoder) header(w *window) (bool, error) {
	c, err := w.peekNonSpace()
	if err != nil {
		return false, err
	}
	if c == 0xEF { // UTF-8 byte order mark
		for len(w.buf)-w.pos < 3 && w.more() {
		}
		if !bytes.HasPrefix(w.buf[w.pos:], []byte{0xEF, 0xBB, 0xBF}) {
			return false, d.syntax(w.offset(), "expected '{' or '[' at the start of a Chrome trace", w.buf, w.pos)
		}
		w.pos += 3
		if c, err = w.peekNonSpace(); err != nil {
			return false, err
		}
	}
	switch c {
	case '[': // JSON Array Format: the file is the events array.
		w.pos++
		d.arrayFormat = true
		return true, nil
	case '{':
		w.pos++
	case 0:
		return false, d.syntax(w.offset(), "empty file: expected a JSON object with traceEvents", nil, 0)
	default:
		return false, d.syntax(w.offset(), "expected '{' or '[' at the start of a Chrome trace", w.buf, w.pos)
	}
	first := true
	for {
		c, err := w.peekNonSpace()
		if err != nil {
			return false, err
		}
		if c == 0 {
			return false, d.syntax(w.offset(), "file ends before traceEvents", nil, 0)
		}
		if c == '}' {
			return false, d.notTrace()
		}
		if !first {
			if c != ',' {
				return false, d.syntax(w.offset(), "expected ',' or '}' between top-level keys", w.buf, w.pos)
			}
			w.pos++
			if c, err = w.peekNonSpace(); err != nil {
				return false, err
			}
		}
		first = false
		if c == 0 {
			return false, d.syntax(w.offset(), "file ends before traceEvents", nil, 0)
		}
		if c != '"' {
			return false, d.syntax(w.offset(), "expected a quoted top-level key", w.buf, w.pos)
		}
		key, err := w.value(d)
		if err != nil {
			return false, err
		}
		k, _ := strconv.Unquote(string(key))
		if c, err = w.peekNonSpace(); err != nil {
			return false, err
		}
		if c != ':' {
			return false, d.syntax(w.offset(), "expected ':' after a top-level key", w.buf, w.pos)
		}
		w.pos++
		if c, err = w.peekNonSpace(); err != nil {
			return false, err
		}
		if k == "traceEvents" {
			if c != '[' {
				return false, d.syntax(w.offset(), "expected '[' to start traceEvents", w.buf, w.pos)
			}
			w.pos++
			return true, nil
		}
		val, err := w.value(d)
		if err != nil {
			return false, err
		}
		d.metaKey(k, val)
	}
}

// tail reads the top-level keys after the events array. Problems there are
// warnings when events were read (they are what matters, and are kept), and
// errors when none were. It returns the position after the object's closing
// '}', and false when the object did not close.
func (d *decoder) tail(b []byte, off int64) (int, bool, error) {
	problem := func(i int, msg string) (int, bool, error) {
		if d.b.Trace().Counts.Events == 0 {
			return i, false, d.syntax(off+int64(i), msg, b, i)
		}
		d.b.Warnf("%s: byte offset %d: %s; the events before it are kept", d.name, off+int64(i), msg)
		return i, false, nil
	}
	i := 0
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return problem(i, "the file ends without the closing '}' of the trace object")
		}
		if b[i] == '}' {
			return i + 1, true, nil
		}
		if b[i] != ',' {
			return problem(i, "expected ',' or '}' after traceEvents")
		}
		i = skipSpace(b, i+1)
		if i >= len(b) || b[i] != '"' {
			return problem(i, "expected a quoted key after traceEvents")
		}
		ks := i
		ke, err := skipString(b, i)
		if err != nil {
			return problem(i, "unterminated key after traceEvents")
		}
		k, _ := strconv.Unquote(string(b[ks:ke]))
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return problem(i, fmt.Sprintf("expected ':' after key %q", truncate(k, 40)))
		}
		i = skipSpace(b, i+1)
		vs := i
		ve, err := skipValue(b, i)
		if err != nil {
			return problem(vs, fmt.Sprintf("unreadable value for key %q after traceEvents", truncate(k, 40)))
		}
		d.metaKey(k, b[vs:ve])
		i = ve
	}
}

// truncate shortens s to at most n characters, saying how much was cut
// (safetext.Cap).
func truncate(s string, n int) string { return safetext.Cap(s, n) }

// metaKey keeps the top-level values the model uses.
func (d *decoder) metaKey(k string, v []byte) {
	if !d.meta.sawEvents {
		if len(d.meta.keys) < maxKeysShown {
			d.meta.keys = append(d.meta.keys, truncate(k, 40))
		} else {
			d.meta.moreKeys++
		}
	}
	switch k {
	case "format":
		s, _ := strconv.Unquote(string(v))
		d.meta.format = s
	case "schemaVersion":
		d.meta.schemaVersion = string(v)
	case "distributedInfo":
		d.meta.distributedInfo = append([]byte(nil), v...)
	case "deviceProperties":
		d.meta.deviceProps = append([]byte(nil), v...)
	case "displayTimeUnit":
		s, _ := strconv.Unquote(string(v))
		d.meta.displayTimeUnit = s
	case "baseTimeNanoseconds":
		if n, ok := parseInt(v); ok {
			d.meta.baseTimeNs = n
		}
	}
}

// chunk is a piece of the events array handed to a worker.
type chunk struct {
	seq   int
	data  []byte
	off   int64
	final bool
	// readErr is a failure of the underlying reader at the end of this chunk.
	readErr error
}

type result struct {
	chunk
	bt  *batch
	end endState
	pos int
	err error
}

// events decodes the traceEvents array. It returns the bytes after the
// closing ']' (the tail of the top-level object) and their offset.
func (d *decoder) events(r io.Reader, carry []byte, off int64, eof bool) ([]byte, int64, error) {
	workers := d.opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	inflight := workers + 2
	size := d.opt.ChunkBytes
	if size <= 0 {
		size = defaultChunk
		if size*inflight > memoryBudget {
			size = max(memoryBudget/inflight, minChunk)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slots := make(chan struct{}, inflight)
	chunks := make(chan chunk, inflight)
	results := make(chan result, inflight)
	free := make(chan []byte, inflight)

	// Reader: cut the stream into chunks at likely event boundaries.
	go func() {
		defer close(chunks)
		pending := append([]byte(nil), carry...)
		seq := 0
		want := size
		for {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			var buf []byte
			select {
			case buf = <-free:
			default:
			}
			need := max(want, len(pending)+want/2)
			if cap(buf) < need {
				buf = make([]byte, need)
			}
			buf = buf[:cap(buf)]
			n := copy(buf, pending)
			var readErr error
			for !eof && n < len(buf) {
				m, err := r.Read(buf[n:])
				n += m
				if err != nil {
					eof = true
					if err != io.EOF {
						readErr = err
					}
				}
			}
			data := buf[:n]
			c := chunk{seq: seq, data: data, off: off, final: eof, readErr: readErr}
			if !eof {
				cut := findCut(data)
				if cut <= 0 {
					if len(data) >= maxEvent {
						c.final, c.readErr = true, fmt.Errorf("no event boundary in %d bytes: an event larger than %d MiB, or not a Chrome trace", len(data), maxEvent>>20)
						c.data = data[:0]
						sendChunk(ctx, chunks, c)
						return
					}
					// One event spans the whole buffer: read on with a bigger one.
					pending = append(pending[:0], data...)
					want *= 2
					<-slots
					continue
				}
				c.data = data[:cut]
				pending = append(pending[:0], data[cut:]...)
				off += int64(cut)
				want = size
			}
			if !sendChunk(ctx, chunks, c) || eof {
				return
			}
			seq++
		}
	}()

	// Workers.
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev *batch
			for c := range chunks {
				bt := sized(prev)
				end, pos, err := parseChunk(c.data, bt)
				prev = bt
				select {
				case results <- result{chunk: c, bt: bt, end: end, pos: pos, err: err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	// Coordinator: take results in file order.
	pendingRes := make(map[int]result)
	next := 0
	var (
		mode     = modeEvents
		carryB   []byte
		carryOff int64
		tail     []byte
		tailOff  int64
	)
	release := func(res result) {
		select {
		case free <- res.data[:0]:
		default:
		}
		<-slots
	}
	for res := range results {
		pendingRes[res.seq] = res
		for {
			res, ok := pendingRes[next]
			if !ok {
				break
			}
			delete(pendingRes, next)
			next++
			d.bytesRead = max(d.bytesRead, res.off+int64(len(res.data)))
			if res.readErr != nil && !isTruncation(res.readErr) {
				return nil, 0, fmt.Errorf("%s: reading at byte offset %d: %w", d.name, res.off+int64(len(res.data)), res.readErr)
			}
			switch mode {
			case modeEvents:
				var done bool
				var err error
				mode, carryB, carryOff, tail, tailOff, done, err = d.settle(res.data, res.off, res.final, res.readErr, res.bt, res.end, res.pos, res.err)
				if err != nil {
					return nil, 0, err
				}
				if done {
					release(res)
					return tail, tailOff, nil
				}
			case modeReparse:
				combined := append(carryB, res.data...)
				bt := newBatch()
				end, pos, perr := parseChunk(combined, bt)
				var done bool
				var err error
				mode, carryB, carryOff, tail, tailOff, done, err = d.settle(combined, carryOff, res.final, res.readErr, bt, end, pos, perr)
				if err != nil {
					return nil, 0, err
				}
				if done {
					release(res)
					return tail, tailOff, nil
				}
			case modeTail:
				if len(tail)+len(res.data) <= maxEvent {
					tail = append(tail, res.data...)
				}
				if res.final {
					release(res)
					return tail, tailOff, nil
				}
			}
			release(res)
		}
	}
	return tail, tailOff, nil
}

type mode uint8

const (
	modeEvents mode = iota
	modeReparse
	modeTail
)

// settle accepts a decoded chunk whose start is known to be a true event
// boundary and decides what comes next.
func (d *decoder) settle(data []byte, off int64, final bool, readErr error, bt *batch, end endState, pos int, perr error) (next mode, carry []byte, carryOff int64, tail []byte, tailOff int64, done bool, err error) {
	if end == endError {
		msg := perr.Error()
		return 0, nil, 0, nil, 0, true, d.syntax(off+int64(pos), msg, data, pos)
	}
	d.merge(bt, off, len(data))
	if readErr != nil {
		d.b.Warnf("%s: the compressed stream ends early at byte offset %d of the JSON (truncated gzip file); using the events before it", d.name, off+int64(len(data)))
	}
	switch end {
	case endClosed:
		tail = append(make([]byte, 0, len(data)-pos), data[pos+1:]...)
		return modeTail, nil, 0, tail, off + int64(pos) + 1, final, nil
	case endIncomplete:
		if final {
			d.b.Warnf("%s: byte offset %d: the file ends inside an event (truncated trace, e.g. after a crash); kept the events before it", d.name, off+int64(pos))
			return modeEvents, nil, 0, nil, 0, true, nil
		}
		carry = append([]byte(nil), data[pos:]...)
		return modeReparse, carry, off + int64(pos), nil, 0, false, nil
	}
	if final {
		d.b.Warnf("%s: byte offset %d: the file ends without the ']' that closes traceEvents (truncated trace, e.g. after a crash); kept every event before it", d.name, off+int64(len(data)))
		return modeEvents, nil, 0, nil, 0, true, nil
	}
	return modeEvents, nil, 0, nil, 0, false, nil
}

func sendChunk(ctx context.Context, ch chan<- chunk, c chunk) bool {
	select {
	case ch <- c:
		return true
	case <-ctx.Done():
		return false
	}
}

// merge remaps a batch's local names, threads and streams to the trace's
// and appends its records.
func (d *decoder) merge(bt *batch, off int64, n int) {
	b := d.b
	t := b.Trace()
	names := make([]trace.NameID, len(bt.names))
	for i, s := range bt.names {
		names[i] = b.Intern(s)
	}
	threads := make([]uint32, len(bt.threads))
	for i, k := range bt.threads {
		if k.label != "" {
			threads[i] = b.ThreadLabel(k.label)
		} else {
			threads[i] = b.Thread(k.pid, k.tid)
		}
	}
	streams := make([]uint32, len(bt.streams))
	for i, s := range bt.streams {
		streams[i] = b.Stream(s.Device, s.ID)
	}
	d.growCaches(len(t.Names))
	d.grow(bt, off, n)
	for _, g := range bt.gpu {
		g.Name = names[g.Name]
		g.Stream = streams[g.Stream]
		if (g.Kind == trace.Memcpy || g.Kind == trace.Memset) && g.Copy == trace.CopyUnknown {
			ck := d.copyOf(g.Name, t.Names)
			g.Copy, g.Src, g.Dst = ck.dir, ck.src, ck.dst
		}
		b.AddGPU(g)
	}
	for _, rc := range bt.runtime {
		rc.Name = names[rc.Name]
		rc.Thread = threads[rc.Thread]
		rc.Kind = d.runtimeOf(rc.Name, t.Names)
		b.AddRuntime(rc)
	}
	for _, c := range bt.cpu {
		c.Name = names[c.Name]
		c.Thread = threads[c.Thread]
		c.Kind = d.cpuOf(c.Name, c.Kind, t.Names)
		b.AddCPU(c)
	}
	for _, tn := range bt.tnames {
		b.SetThreadName(threads[tn.thread], tn.name)
	}
	c := &t.Counts
	c.Events += bt.counts.Events
	c.Flows += bt.counts.Flows
	c.Metadata += bt.counts.Metadata
	c.Instants += bt.counts.Instants
	c.Ignored += bt.counts.Ignored
	c.BadTime += bt.counts.BadTime
	c.NoPhase += bt.counts.NoPhase
	if bt.firstNoPhase >= 0 && d.noPhase == 0 {
		d.firstNoPhase = off + int64(bt.firstNoPhase)
	}
	d.noPhase += bt.counts.NoPhase
	if bt.firstBadTime >= 0 && d.badTimes == 0 {
		d.firstBadTime = off + int64(bt.firstBadTime)
		d.badTimeWhat = bt.badTimeWhat
	}
	d.badTimes += bt.counts.BadTime
	if bt.profEnd > 0 {
		if d.profStart == 0 || bt.profStart < d.profStart {
			d.profStart = bt.profStart
		}
		d.profEnd = max(d.profEnd, bt.profEnd)
	}
}

// grow makes room for a batch. When the size of the whole JSON is known,
// a slice that is full grows at once to the size the records read so far
// extrapolate to (plus 5 %), instead of by a quarter at a time: fewer
// copies, and less garbage at the peak.
func (d *decoder) grow(bt *batch, off int64, n int) {
	t := d.b.Trace()
	need := func(have, capacity, add int) int {
		if have+add <= capacity {
			return 0
		}
		done := off + int64(n)
		if d.sizeHint > done && done > 0 {
			want := int(float64(have+add) * float64(d.sizeHint) / float64(done) * 1.05)
			return max(want-have, add)
		}
		return add
	}
	d.b.Grow(need(len(t.GPU), cap(t.GPU), len(bt.gpu)), need(len(t.Runtime), cap(t.Runtime), len(bt.runtime)), need(len(t.CPU), cap(t.CPU), len(bt.cpu)))
}

func (d *decoder) growCaches(n int) {
	for len(d.runtimeKind) < n {
		d.runtimeKind = append(d.runtimeKind, -1)
		d.cpuKind = append(d.cpuKind, -1)
		d.copyKind = append(d.copyKind, copyKinds{})
		d.haveCopy = append(d.haveCopy, false)
	}
}

func (d *decoder) runtimeOf(id trace.NameID, names []string) trace.RuntimeKind {
	if k := d.runtimeKind[id]; k >= 0 {
		return trace.RuntimeKind(k)
	}
	k := trace.ClassifyRuntime(names[id])
	d.runtimeKind[id] = int16(k)
	return k
}

// noSpecial marks a name that is no step, DataLoader or optimizer range.
const noSpecial = 255

func (d *decoder) cpuOf(id trace.NameID, fallback trace.CPUKind, names []string) trace.CPUKind {
	k := d.cpuKind[id]
	if k < 0 {
		k = int16(trace.ClassifyCPU(names[id], noSpecial))
		d.cpuKind[id] = k
	}
	if k == noSpecial {
		return fallback
	}
	return trace.CPUKind(k)
}

func (d *decoder) copyOf(id trace.NameID, names []string) copyKinds {
	if d.haveCopy[id] {
		return d.copyKind[id]
	}
	dir, src, dst := trace.ParseCopyName(names[id])
	ck := copyKinds{dir, src, dst}
	d.copyKind[id], d.haveCopy[id] = ck, true
	return ck
}

// finish interprets the metadata and returns the sorted, linked trace.
func (d *decoder) finish() *trace.Trace {
	t := d.b.Trace()
	m := &t.Meta
	m.SchemaVersion = d.meta.schemaVersion
	m.DisplayTimeUnit = d.meta.displayTimeUnit
	m.BaseTimeNs = d.meta.baseTimeNs
	m.ProfiledStart, m.ProfiledEnd = d.profStart, d.profEnd
	t.Counts.Bytes = d.bytesRead
	if len(d.meta.distributedInfo) > 0 {
		var di struct {
			Rank      *int   `json:"rank"`
			WorldSize int    `json:"world_size"`
			Backend   string `json:"backend"`
		}
		if err := json.Unmarshal(d.meta.distributedInfo, &di); err != nil {
			d.b.Warnf("%s: distributedInfo unreadable (%v); rank unknown", d.name, err)
		} else if di.Rank != nil {
			m.Rank, m.WorldSize, m.Backend = *di.Rank, di.WorldSize, di.Backend
		}
	}
	if len(d.meta.deviceProps) > 0 {
		var props []struct {
			ID             int    `json:"id"`
			Name           string `json:"name"`
			NumSms         int    `json:"numSms"`
			TotalGlobalMem int64  `json:"totalGlobalMem"`
		}
		if err := json.Unmarshal(d.meta.deviceProps, &props); err != nil {
			d.b.Warnf("%s: deviceProperties unreadable (%v)", d.name, err)
		}
		for _, p := range props {
			m.Devices = append(m.Devices, trace.Device{ID: p.ID, Name: p.Name, SMs: p.NumSms, Bytes: p.TotalGlobalMem})
		}
	}
	if n, first := d.b.DropOutsideWindow(d.profStart, d.profEnd); n > 0 {
		// The window is the profiler's own span, known once every event
		// is read: an event more than its length outside it (a 2.5 h
		// kernel in a 5 ms trace) is no time the profiler recorded.
		what := fmt.Sprintf("%d events", n)
		if n == 1 {
			what = "1 event"
		}
		d.b.Warnf("%s: dropped %s lying more than the profiled window's length outside it (%s of profiler span; the first: %s)",
			d.name, what, time.Duration(d.profEnd-d.profStart), first)
	}
	if d.badTimes > 0 {
		d.b.Warnf("%s: dropped %d events whose ts or dur is NaN, infinite, negative or missing (the first at byte offset %d: %s)", d.name, d.badTimes, d.firstBadTime, d.badTimeWhat)
	}
	if d.noPhase > 0 {
		what := fmt.Sprintf("%d events have", d.noPhase)
		if d.noPhase == 1 {
			what = "1 event has"
		}
		d.b.Warnf("%s: %s no \"ph\" (the Chrome-trace phase that says what an event is), skipped (the first at byte offset %d)", d.name, what, d.firstNoPhase)
	}
	return d.b.Finish()
}

// window is a growable view of the start of the stream, for the sequential
// header parse.
type window struct {
	r    io.Reader
	buf  []byte
	pos  int
	base int64
	eof  bool
	err  error
}

func (w *window) offset() int64 { return w.base + int64(w.pos) }

// more reads more bytes; it returns false at the end of the stream.
func (w *window) more() bool {
	if w.eof {
		return false
	}
	if w.pos > 0 {
		n := copy(w.buf, w.buf[w.pos:])
		w.base += int64(w.pos)
		w.buf = w.buf[:n]
		w.pos = 0
	}
	if len(w.buf) == cap(w.buf) {
		nb := make([]byte, len(w.buf), max(2*cap(w.buf), 64<<10))
		copy(nb, w.buf)
		w.buf = nb
	}
	n, err := w.r.Read(w.buf[len(w.buf):cap(w.buf)])
	w.buf = w.buf[:len(w.buf)+n]
	if err != nil {
		w.eof = true
		if err != io.EOF && !isTruncation(err) {
			w.err = err
		}
	}
	return n > 0 || !w.eof
}

// peekNonSpace skips whitespace and returns the next byte, 0 at the end.
func (w *window) peekNonSpace() (byte, error) {
	for {
		w.pos = skipSpace(w.buf, w.pos)
		if w.pos < len(w.buf) {
			return w.buf[w.pos], nil
		}
		if !w.more() {
			return 0, w.err
		}
	}
}

// value returns the JSON value at the current position and moves past it.
func (w *window) value(d *decoder) ([]byte, error) {
	for {
		end, err := skipValue(w.buf, w.pos)
		if err == nil {
			v := w.buf[w.pos:end]
			w.pos = end
			return v, nil
		}
		if err != errShort {
			pos := w.pos
			if se, ok := err.(*syntaxError); ok {
				pos = se.pos
			}
			return nil, d.syntax(w.base+int64(pos), err.Error(), w.buf, pos)
		}
		if len(w.buf)-w.pos > maxEvent {
			return nil, d.syntax(w.offset(), fmt.Sprintf("a top-level value larger than %d MiB", maxEvent>>20), nil, 0)
		}
		if !w.more() {
			if w.err != nil {
				return nil, fmt.Errorf("%s: %w", d.name, w.err)
			}
			return nil, d.syntax(w.offset(), "file ends inside a top-level value before traceEvents", w.buf, w.pos)
		}
	}
}
