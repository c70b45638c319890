package timeline

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// The recording format ("run.gpufeed"): gzip-compressed JSON lines, written
// as the sampler goes so that a crash loses at most the last second.
//
//	line 1:  {"format":"gpufeed-timeline","schema_version":1,"meta":{...}}
//	then any of, in sampling order:
//	         {"devices":[...]}            GPU static facts
//	         {"proc":{...}}               a process, when first seen
//	         {"thread":{...}}             a thread, when first seen
//	         {"tick":{...}}               one sample
//	         {"event":{...}}              something that happened once
//	last:    {"end":{"meta":{...},"counts":{...},"procs":[...],"threads":[...]}}
//
// A later proc/thread record for the same key replaces the earlier one; the
// end record carries every process's and thread's final facts (roles, exit,
// last seen) and the final meta (observer cost, how the window ended). A file
// without its end record is a truncated recording: the reader returns what it
// held, with a warning.

// FormatName identifies a recording in its first line.
const FormatName = "gpufeed-timeline"

// flushEvery bounds how much a crash can lose: the gzip stream is flushed
// (a sync block, readable up to that point) at least this often.
const flushEvery = time.Second

type header struct {
	Format        string `json:"format"`
	SchemaVersion int    `json:"schema_version"`
	Meta          *Meta  `json:"meta"`
}

type endRecord struct {
	Meta    *Meta         `json:"meta"`
	Counts  Counts        `json:"counts"`
	Procs   []*ProcInfo   `json:"procs"`
	Threads []*ThreadInfo `json:"threads"`
}

type record struct {
	Devices []gpu.DeviceInfo `json:"devices,omitempty"`
	Proc    *ProcInfo        `json:"proc,omitempty"`
	Thread  *ThreadInfo      `json:"thread,omitempty"`
	Tick    *Tick            `json:"tick,omitempty"`
	Event   *Event           `json:"event,omitempty"`
	End     *endRecord       `json:"end,omitempty"`
}

// Writer streams a timeline to a recording.
type Writer struct {
	w   io.Writer
	gz  *gzip.Writer
	buf bytes.Buffer
	// enc encodes one record into buf, whose bidirectional controls are
	// escaped before it goes to gz: a recording holds the job's names and
	// command lines as -o json does, escaped alike, so zcat or jq on it
	// shows no reordered line.
	enc       *json.Encoder
	lastFlush time.Time
	wroteMeta bool
	err       error
}

// NewWriter starts a recording on w. Call WriteMeta first, Close last.
func NewWriter(w io.Writer) *Writer {
	wr := &Writer{w: w, gz: gzip.NewWriter(w), lastFlush: time.Now()}
	wr.enc = json.NewEncoder(&wr.buf)
	return wr
}

func (w *Writer) put(v any) error {
	if w.err != nil {
		return w.err
	}
	w.buf.Reset()
	if err := w.enc.Encode(v); err != nil {
		w.err = err
		return err
	}
	if _, err := w.gz.Write(safetext.EscapeJSON(w.buf.Bytes())); err != nil {
		w.err = err
		return err
	}
	if time.Since(w.lastFlush) >= flushEvery {
		w.lastFlush = time.Now()
		if err := w.gz.Flush(); err != nil {
			w.err = err
		}
	}
	return w.err
}

// WriteMeta writes the header line.
func (w *Writer) WriteMeta(m Meta) error {
	if w.wroteMeta {
		return errors.New("recording: meta written twice")
	}
	w.wroteMeta = true
	m.SchemaVersion = SchemaVersion
	return w.put(header{Format: FormatName, SchemaVersion: SchemaVersion, Meta: &m})
}

// WriteDevices records the GPUs' static facts.
func (w *Writer) WriteDevices(d []gpu.DeviceInfo) error { return w.put(record{Devices: d}) }

// WriteProc records a process.
func (w *Writer) WriteProc(p *ProcInfo) error { return w.put(record{Proc: p}) }

// WriteThread records a thread.
func (w *Writer) WriteThread(t *ThreadInfo) error { return w.put(record{Thread: t}) }

// WriteTick records one sample.
func (w *Writer) WriteTick(t *Tick) error { return w.put(record{Tick: t}) }

// WriteEvent records an event.
func (w *Writer) WriteEvent(e Event) error { return w.put(record{Event: &e}) }

// Close writes the end record from the final timeline and closes the gzip
// stream (not the underlying writer).
func (w *Writer) Close(tl *Timeline) error {
	end := &endRecord{Meta: &tl.Meta, Counts: tl.Counts}
	for _, p := range tl.Procs {
		end.Procs = append(end.Procs, p)
	}
	sort.Slice(end.Procs, func(i, j int) bool { return procLess(end.Procs[i].Key, end.Procs[j].Key) })
	for _, t := range tl.Threads {
		end.Threads = append(end.Threads, t)
	}
	sort.Slice(end.Threads, func(i, j int) bool { return threadLess(end.Threads[i].Key, end.Threads[j].Key) })
	if !w.wroteMeta {
		if err := w.WriteMeta(tl.Meta); err != nil {
			return err
		}
	}
	err := w.put(record{End: end})
	if cerr := w.gz.Close(); err == nil {
		err = cerr
	}
	return err
}

func procLess(a, b ProcKey) bool {
	if a.PID != b.PID {
		return a.PID < b.PID
	}
	return a.StartTime < b.StartTime
}

func threadLess(a, b ThreadKey) bool {
	if a.TID != b.TID {
		return a.TID < b.TID
	}
	return a.StartTime < b.StartTime
}

// Encode writes a whole timeline as a recording.
func Encode(w io.Writer, tl *Timeline) error {
	enc := NewWriter(w)
	if err := enc.WriteMeta(tl.Meta); err != nil {
		return err
	}
	if len(tl.Devices) > 0 {
		if err := enc.WriteDevices(tl.Devices); err != nil {
			return err
		}
	}
	for i := range tl.Ticks {
		if err := enc.WriteTick(&tl.Ticks[i]); err != nil {
			return err
		}
	}
	for _, e := range tl.Events {
		if err := enc.WriteEvent(e); err != nil {
			return err
		}
	}
	return enc.Close(tl)
}

// Each line is capped as it is read, by what it holds (its record's key,
// written first): a recording is untrusted, and gzip compresses a line of
// one repeated byte a thousandfold, so a 927 KB file held a 200 MB event
// that took 697 MiB and 38 s to read whole. The caps are far above what a
// sampler writes: a tick of 10,000 threads is ~2 MB; the header and the
// end record (every process's and thread's facts, the CPU profile and
// driver calls in the meta) a few MB; a process its command line (at most
// 1 MiB as read) and allowlisted environment; an event a kernel log line
// or an error message, under a few KiB.
const (
	maxLine      = 64 << 20 // the header, a tick, the end record
	maxProcLine  = 4 << 20
	maxSmallLine = 1 << 20 // a thread, an event, the devices, a record of a kind this gpufeed does not know
)

// lineCap is the cap of a line that starts with prefix (the first bytes
// read of it), and the kind of record it holds.
func lineCap(prefix []byte, first bool) (int, string) {
	if first {
		return maxLine, "header"
	}
	p := bytes.TrimLeft(prefix, " \t\r")
	if !bytes.HasPrefix(p, []byte("{")) {
		return maxSmallLine, "line"
	}
	p = bytes.TrimLeft(p[1:], " \t\r")
	for _, k := range []struct {
		key  string
		cap  int
		kind string
	}{
		{`"tick"`, maxLine, "tick"}, {`"end"`, maxLine, "end record"}, {`"proc"`, maxProcLine, "process record"},
		{`"thread"`, maxSmallLine, "thread record"}, {`"event"`, maxSmallLine, "event"}, {`"devices"`, maxSmallLine, "device record"},
	} {
		if bytes.HasPrefix(p, []byte(k.key)) {
			return k.cap, k.kind
		}
	}
	return maxSmallLine, "record"
}

// lineReader reads a recording's lines, each capped by lineCap while it
// is read: the bytes of a line past its cap are read and dropped, never
// held, and the line is returned empty with tooLong set.
type lineReader struct {
	r   *bufio.Reader
	buf []byte
	err error
	n   int // lines returned
	off int64
	// Of the last line: its offset in the decompressed stream, and when
	// it was too long, its kind, cap and length.
	start   int64
	tooLong bool
	kind    string
	cap     int
	size    int64
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Scan reads the next line; false at the end of the stream or on an error
// (Err).
func (l *lineReader) Scan() bool {
	l.buf, l.tooLong, l.start, l.size = l.buf[:0], false, l.off, 0
	if l.err != nil {
		return false
	}
	limit := -1
	for {
		chunk, err := l.r.ReadSlice('\n')
		l.off += int64(len(chunk))
		l.size += int64(len(chunk))
		if limit < 0 {
			limit, l.kind = lineCap(chunk, l.n == 0)
			l.cap = limit
		}
		if !l.tooLong {
			if len(l.buf)+len(chunk) > limit+1 { // +1: the newline
				l.tooLong = true
				l.buf = l.buf[:0]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil:
			l.n++
			l.buf = bytes.TrimSuffix(l.buf, []byte("\n"))
			return true
		default:
			// A read error drops the part of the line read (a stream cut
			// mid-line: the caller warns that it is truncated); the end
			// of the stream returns a last line without a newline.
			l.err = err
			if err != io.EOF || l.size == 0 {
				return false
			}
			l.n++
			return true
		}
	}
}

// Bytes is the last line, without its newline (empty when too long).
func (l *lineReader) Bytes() []byte { return l.buf }

// Err is the error that ended the reading, nil at the end of the stream.
func (l *lineReader) Err() error {
	if l.err == io.EOF {
		return nil
	}
	return l.err
}

// tooLongMsg says which line was too long, where, and why it cannot be a
// sampler's.
func (l *lineReader) tooLongMsg(name string) string {
	return fmt.Sprintf("%s: line %d (byte %d of the decompressed stream): %s of %s, more than the %s a sampler writes at most",
		name, l.n, l.start, l.kind, sizeText(l.size), sizeText(int64(l.cap)))
}

func sizeText(n int64) string { return safetext.Bytes(float64(n), 1, 1) }

// Decode reads a recording. name is used in messages. It refuses a file of
// another format or an unknown schema version, and one whose content cannot
// be what was recorded:
//
//   - gzip's checksum (CRC-32 and length of everything, at the end of the
//     stream) does not match, or the compressed data do not decode: some
//     byte changed after it was written. The checksum covers the whole
//     stream at once, so no part can be told good from bad: nothing is kept.
//   - a timeline no sampler writes: ticks out of order or repeated, a
//     negative time, a window or interval that is not positive, records
//     after the end record. The error names the line.
//
// A file cut short (a crash, a full disk, a copy cut off) yields its complete
// lines plus a warning: a cut changes no byte before it, but without the
// stream's end its checksum cannot be checked, and the warning says the data
// are unverified. Bytes after the end of a complete stream are ignored with
// a warning.
func Decode(r io.Reader, name string) (*Timeline, []string, error) {
	br := bufio.NewReader(r)
	gz, err := gzip.NewReader(br)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: not a gpufeed recording (expected a gzip stream): %w", name, err)
	}
	gz.Multistream(false)
	sr := &streamReader{gz: gz, br: br}
	sc := newLineReader(sr)
	tl := &Timeline{Procs: map[ProcKey]*ProcInfo{}, Threads: map[ThreadKey]*ThreadInfo{}}
	var warnings []string
	line := 0
	if !sc.Scan() {
		if err := streamErr(name, sc.Err()); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%s: empty recording (no header line)", name)
	}
	line++
	if sc.tooLong {
		if err := streamErr(name, nextErr(sc)); err != nil {
			return nil, nil, err
		}
		return nil, nil, errors.New(sc.tooLongMsg(name) + ": not a gpufeed recording's header")
	}
	var h header
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Format != FormatName {
		if err := streamErr(name, nextErr(sc)); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%s: line 1: expected a %s header", name, FormatName)
	}
	if h.SchemaVersion != SchemaVersion {
		return nil, nil, fmt.Errorf("%s: recording has schema version %d; this gpufeed reads version %d (use the gpufeed that recorded it)",
			name, h.SchemaVersion, SchemaVersion)
	}
	if h.Meta == nil {
		return nil, nil, fmt.Errorf("%s: line 1: header has no meta", name)
	}
	if err := checkMeta(h.Meta); err != nil {
		return nil, nil, fmt.Errorf("%s: line 1: %v", name, err)
	}
	tl.Meta = *h.Meta
	ended := 0 // the line of the end record
	lastTick := 0
	for sc.Scan() {
		line++
		if sc.tooLong {
			// Dropped as it was read: the rest of the recording is read.
			warnings = append(warnings, sc.tooLongMsg(name)+": skipped")
			continue
		}
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			if !sc.Scan() && sr.cut() {
				// The last line was cut mid-record: a truncated file.
				warnings = append(warnings, fmt.Sprintf("%s: line %d: last record cut short (%v)", name, line, err))
				break
			}
			// A line that does not parse in a stream that goes on: a changed
			// byte when the checksum says so, else a line no sampler wrote.
			if err := streamErr(name, nextErr(sc)); err != nil {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%s: line %d: expected a record: %v", name, line, err)
		}
		if ended > 0 {
			if err := streamErr(name, nextErr(sc)); err != nil {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("%s: line %d: a record after the end record (line %d): this file holds more than one recording, or lines were added to it", name, line, ended)
		}
		switch {
		case rec.End != nil:
			if rec.End.Meta != nil {
				if err := checkMeta(rec.End.Meta); err != nil {
					return nil, nil, fmt.Errorf("%s: line %d: end record: %v", name, line, err)
				}
				tl.Meta = *rec.End.Meta
			}
			tl.Counts = rec.End.Counts
			for _, p := range rec.End.Procs {
				if p != nil {
					if err := checkComm(p.Comm); err != nil {
						return nil, nil, fmt.Errorf("%s: line %d: end record: pid %d: %v", name, line, p.Key.PID, err)
					}
					p.Cmdline = safetext.ScrubArgs(p.Cmdline)
					tl.Procs[p.Key] = p
				}
			}
			for _, t := range rec.End.Threads {
				if t != nil {
					if err := checkComm(t.Comm); err != nil {
						return nil, nil, fmt.Errorf("%s: line %d: end record: tid %d: %v", name, line, t.Key.TID, err)
					}
					tl.Threads[t.Key] = t
				}
			}
			ended = line
		case rec.Devices != nil:
			tl.Devices = rec.Devices
		case rec.Proc != nil:
			if err := checkComm(rec.Proc.Comm); err != nil {
				return nil, nil, fmt.Errorf("%s: line %d: pid %d: %v", name, line, rec.Proc.Key.PID, err)
			}
			// A recording made before command lines were scrubbed where
			// they are read still holds their secrets: scrubbed here too.
			rec.Proc.Cmdline = safetext.ScrubArgs(rec.Proc.Cmdline)
			tl.Procs[rec.Proc.Key] = rec.Proc
		case rec.Thread != nil:
			if err := checkComm(rec.Thread.Comm); err != nil {
				return nil, nil, fmt.Errorf("%s: line %d: tid %d: %v", name, line, rec.Thread.Key.TID, err)
			}
			tl.Threads[rec.Thread.Key] = rec.Thread
		case rec.Tick != nil:
			tk := rec.Tick
			if tk.T < 0 {
				return nil, nil, fmt.Errorf("%s: line %d: tick at %s: ticks are times since the window started, never negative", name, line, seconds(tk.T))
			}
			if n := len(tl.Ticks); n > 0 && tk.T <= tl.Ticks[n-1].T {
				return nil, nil, fmt.Errorf("%s: line %d: tick at %s is not after the tick at %s (line %d): ticks are written in sampling order, each later than the one before",
					name, line, seconds(tk.T), seconds(tl.Ticks[n-1].T), lastTick)
			}
			tl.Ticks = append(tl.Ticks, *tk)
			lastTick = line
		case rec.Event != nil:
			tl.Events = append(tl.Events, *rec.Event)
		default:
			warnings = append(warnings, fmt.Sprintf("%s: line %d: unknown record skipped", name, line))
		}
	}
	if err := sc.Err(); err != nil && !sr.cut() {
		if err := streamErr(name, err); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%s: line %d: %w", name, line+1, err)
	}
	switch {
	case sr.cut() && ended > 0:
		warnings = append(warnings, fmt.Sprintf("%s: the compressed stream is cut short after its end record: every sample is there, but without the stream's end its checksum cannot be checked (unverified)", name))
	case sr.cut():
		warnings = append(warnings, fmt.Sprintf("%s: truncated recording (cut short, no end record): kept %d ticks up to line %d, unverified (gzip's checksum is at the end of the stream); exits and roles after that are unknown",
			name, len(tl.Ticks), line))
	case ended == 0:
		warnings = append(warnings, fmt.Sprintf("%s: truncated recording (no end record): kept %d ticks up to line %d; exits and roles after that are unknown",
			name, len(tl.Ticks), line))
	}
	if ended == 0 && len(tl.Ticks) > 0 {
		tl.Meta.Ended = "truncated recording"
	}
	if sr.trailing {
		warnings = append(warnings, fmt.Sprintf("%s: bytes after the end of the compressed recording ignored (the recording itself is complete and its checksum matches)", name))
	}
	sort.SliceStable(tl.Events, func(i, j int) bool { return tl.Events[i].T < tl.Events[j].T })
	return tl, warnings, nil
}

// maxComm is the longest name a kernel gives a task: TASK_COMM_LEN (16
// bytes with its NUL) for a process or thread; recent kernels show a
// kernel thread's full name, up to 64.
const maxComm = 64

// checkComm refuses a process or thread name no kernel keeps: what /proc
// gave the sampler is at most maxComm bytes.
func checkComm(comm string) error {
	if len(comm) > maxComm {
		return fmt.Errorf("a name of %d bytes: the kernel keeps at most %d of a process's or thread's name, so no sampler wrote it", len(comm), maxComm)
	}
	return nil
}

// checkMeta refuses a window no sampler runs.
func checkMeta(m *Meta) error {
	if m.Interval <= 0 {
		return fmt.Errorf("sampling interval %v: a recording's interval is positive", time.Duration(m.Interval))
	}
	if m.Duration <= 0 {
		return fmt.Errorf("planned window %v: a recording's window is positive", time.Duration(m.Duration))
	}
	return nil
}

func seconds(ns int64) string { return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + " s" }

// nextErr reads on past the current line so that a stream error behind it
// (a checksum that does not match) is found before a line is blamed.
func nextErr(sc *lineReader) error {
	for sc.Scan() {
	}
	return sc.Err()
}

// streamErr turns what the gzip stream reported into the error to return:
// nil when the stream is intact (or merely cut short), else an error saying
// the recording is corrupt.
func streamErr(name string, err error) error {
	var corrupt flate.CorruptInputError
	switch {
	case err == nil, errors.Is(err, io.ErrUnexpectedEOF):
		return nil
	case errors.Is(err, gzip.ErrChecksum):
		return fmt.Errorf("%s: corrupt recording: gzip's checksum does not match the data, so some byte changed after it was written (on disk or in a copy); its samples are not to be trusted and none is judged (a copy of the original may be intact)", name)
	case errors.As(err, &corrupt), errors.Is(err, gzip.ErrHeader):
		return fmt.Errorf("%s: corrupt recording: the compressed data do not decode (%v); its samples are not to be trusted and none is judged", name, err)
	}
	return nil
}

// streamReader reads the gzip stream of one recording (a single gzip
// member) and remembers how it ended: cut short (no end of stream, so no
// checksum to check), or complete, and whether bytes follow it.
type streamReader struct {
	gz       *gzip.Reader
	br       *bufio.Reader
	err      error
	trailing bool
}

func (s *streamReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.gz.Read(p)
	if err == io.EOF {
		// The member ended and its checksum matched; br is what gzip read
		// from (a ByteReader, so it added no buffer of its own).
		if _, perr := s.br.Peek(1); perr == nil {
			s.trailing = true
		}
	}
	if err != nil {
		s.err = err
	}
	return n, err
}

func (s *streamReader) cut() bool { return errors.Is(s.err, io.ErrUnexpectedEOF) }
