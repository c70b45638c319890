package timeline

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
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
	w         io.Writer
	gz        *gzip.Writer
	enc       *json.Encoder
	lastFlush time.Time
	wroteMeta bool
	err       error
}

// NewWriter starts a recording on w. Call WriteMeta first, Close last.
func NewWriter(w io.Writer) *Writer {
	gz := gzip.NewWriter(w)
	return &Writer{w: w, gz: gz, enc: json.NewEncoder(gz), lastFlush: time.Now()}
}

func (w *Writer) put(v any) error {
	if w.err != nil {
		return w.err
	}
	if err := w.enc.Encode(v); err != nil {
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

// maxLine bounds one JSON line: a tick of 10,000 threads is ~2 MB.
const maxLine = 256 << 20

// Decode reads a recording. name is used in messages. It refuses a file of
// another format or an unknown schema version; a truncated file (a crash, a
// full disk, a copy cut short) yields what it held plus a warning.
func Decode(r io.Reader, name string) (*Timeline, []string, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: not a gpufeed recording (expected a gzip stream): %w", name, err)
	}
	sc := bufio.NewScanner(gz)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	tl := &Timeline{Procs: map[ProcKey]*ProcInfo{}, Threads: map[ThreadKey]*ThreadInfo{}}
	var warnings []string
	line := 0
	if !sc.Scan() {
		return nil, nil, fmt.Errorf("%s: empty recording (no header line): %v", name, scanErr(sc))
	}
	line++
	var h header
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Format != FormatName {
		return nil, nil, fmt.Errorf("%s: line 1: expected a %s header", name, FormatName)
	}
	if h.SchemaVersion != SchemaVersion {
		return nil, nil, fmt.Errorf("%s: recording has schema version %d; this gpufeed reads version %d (use the gpufeed that recorded it)",
			name, h.SchemaVersion, SchemaVersion)
	}
	if h.Meta == nil {
		return nil, nil, fmt.Errorf("%s: line 1: header has no meta", name)
	}
	tl.Meta = *h.Meta
	ended := false
	for sc.Scan() {
		line++
		var rec record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			if !sc.Scan() && (sc.Err() == nil || isTruncation(sc.Err())) {
				// The last line was cut mid-record: a truncated file, not a corrupt one.
				warnings = append(warnings, fmt.Sprintf("%s: line %d: last record cut short (%v)", name, line, err))
				break
			}
			return tl, warnings, fmt.Errorf("%s: line %d: expected a record: %v", name, line, err)
		}
		switch {
		case rec.End != nil:
			if rec.End.Meta != nil {
				tl.Meta = *rec.End.Meta
			}
			tl.Counts = rec.End.Counts
			for _, p := range rec.End.Procs {
				tl.Procs[p.Key] = p
			}
			for _, t := range rec.End.Threads {
				tl.Threads[t.Key] = t
			}
			ended = true
		case rec.Devices != nil:
			tl.Devices = rec.Devices
		case rec.Proc != nil:
			tl.Procs[rec.Proc.Key] = rec.Proc
		case rec.Thread != nil:
			tl.Threads[rec.Thread.Key] = rec.Thread
		case rec.Tick != nil:
			tl.Ticks = append(tl.Ticks, *rec.Tick)
		case rec.Event != nil:
			tl.Events = append(tl.Events, *rec.Event)
		default:
			warnings = append(warnings, fmt.Sprintf("%s: line %d: unknown record skipped", name, line))
		}
	}
	if err := sc.Err(); err != nil {
		if !isTruncation(err) {
			return tl, warnings, fmt.Errorf("%s: line %d: %w", name, line+1, err)
		}
		if ended {
			warnings = append(warnings, fmt.Sprintf("%s: the compressed stream is cut short after its end record (%v); the samples are complete", name, err))
		}
	}
	if !ended {
		warnings = append(warnings, fmt.Sprintf("%s: truncated recording (no end record): kept %d ticks up to line %d; exits and roles after that are unknown",
			name, len(tl.Ticks), line))
		if n := len(tl.Ticks); n > 0 {
			tl.Meta.Ended = "truncated recording"
		}
	}
	sort.SliceStable(tl.Events, func(i, j int) bool { return tl.Events[i].T < tl.Events[j].T })
	return tl, warnings, nil
}

func scanErr(sc *bufio.Scanner) error {
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// isTruncation reports the errors a cut-short gzip stream produces.
func isTruncation(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, io.EOF)
}
