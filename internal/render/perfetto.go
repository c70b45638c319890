// The Perfetto renderer's encoder: a native Perfetto protobuf trace (a
// sequence of TracePackets holding TrackDescriptors and TrackEvents),
// written packet by packet so memory stays bounded whatever the length of
// the recording. The Perfetto FAQ recommends TrackEvent over the legacy JSON
// importer; the UI (ui.perfetto.dev) and trace_processor open it as is.
//
// Field numbers are Perfetto's own, from its protos (google/perfetto):
//   - protos/perfetto/trace/trace.proto: Trace { repeated TracePacket packet = 1 }
//   - protos/perfetto/trace/trace_packet.proto: TracePacket { timestamp = 8,
//     trusted_packet_sequence_id = 10, track_event = 11, interned_data = 12,
//     sequence_flags = 13, track_descriptor = 60 }; SequenceFlags
//     SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2
//   - protos/perfetto/trace/track_event/track_event.proto: TrackEvent {
//     debug_annotations = 4, type = 9, name_iid = 10, track_uuid = 11,
//     categories = 22, name = 23, double_counter_value = 44 }; Type
//     TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4
//   - protos/perfetto/trace/track_event/track_descriptor.proto:
//     TrackDescriptor { uuid = 1, name = 2, process = 3, thread = 4,
//     parent_uuid = 5, counter = 8 }
//   - protos/perfetto/trace/track_event/counter_descriptor.proto:
//     CounterDescriptor { unit = 3 }; Unit UNIT_COUNT = 2, UNIT_SIZE_BYTES = 3
//   - protos/perfetto/trace/track_event/process_descriptor.proto:
//     ProcessDescriptor { pid = 1, process_name = 6 }
//   - protos/perfetto/trace/track_event/thread_descriptor.proto:
//     ThreadDescriptor { pid = 1, tid = 2, thread_name = 5 }
//   - protos/perfetto/trace/track_event/debug_annotation.proto:
//     DebugAnnotation { int_value = 4, double_value = 5, string_value = 6, name = 10 }
//   - protos/perfetto/trace/interned_data/interned_data.proto:
//     InternedData { event_names = 2 }, EventName { iid = 1, name = 2 }
//
// Timestamps are nanoseconds on the trace's default clock (BOOTTIME): a live
// recording is placed at its time since boot when the sampler read it, so
// kernel log lines fall where the kernel wrote them.

package render

import (
	"bufio"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// Field numbers (see the file comment for where each comes from).
const (
	fTracePacket = 1

	fPktTimestamp       = 8
	fPktSequenceID      = 10
	fPktTrackEvent      = 11
	fPktInternedData    = 12
	fPktSequenceFlags   = 13
	fPktTrackDescriptor = 60

	seqIncrementalStateCleared = 1
	seqNeedsIncrementalState   = 2

	fEvDebugAnnotations = 4
	fEvType             = 9
	fEvNameIID          = 10
	fEvTrackUUID        = 11
	fEvCategories       = 22
	fEvName             = 23
	fEvDoubleCounter    = 44

	evSliceBegin = 1
	evSliceEnd   = 2
	evInstant    = 3
	evCounter    = 4

	fTdUUID    = 1
	fTdName    = 2
	fTdProcess = 3
	fTdThread  = 4
	fTdParent  = 5
	fTdCounter = 8

	fCdUnit       = 3
	unitCount     = 2
	unitSizeBytes = 3

	fPdPID  = 1
	fPdName = 6

	fThPID  = 1
	fThTID  = 2
	fThName = 5

	fDaInt    = 4
	fDaDouble = 5
	fDaString = 6
	fDaName   = 10

	fInEventNames = 2
	fEnIID        = 1
	fEnName       = 2

	// sequenceID is the one packet sequence everything is written on.
	sequenceID = 1
)

// pfArg is one debug annotation: a string or a number.
type pfArg struct {
	Name  string
	Str   string
	Num   float64
	IsNum bool
}

func strArg(name, v string) pfArg         { return pfArg{Name: name, Str: v} }
func numArg(name string, v float64) pfArg { return pfArg{Name: name, Num: v, IsNum: true} }

// pfWriter writes one trace. The first error sticks and later calls do
// nothing; Close reports it.
type pfWriter struct {
	w          *bufio.Writer
	pkt, ev, m []byte
	nextUUID   uint64
	names      map[string]uint64
	err        error
	// Packets counts what was written, for tests and the size budget.
	Packets int
}

func newPFWriter(w io.Writer) *pfWriter {
	p := &pfWriter{w: bufio.NewWriterSize(w, 256<<10), nextUUID: 1, names: map[string]uint64{}}
	// The first packet clears the sequence's incremental state, so the
	// interned names that follow are valid on it.
	p.pkt = protowire.AppendTag(p.pkt[:0], fPktSequenceID, protowire.VarintType)
	p.pkt = protowire.AppendVarint(p.pkt, sequenceID)
	p.pkt = protowire.AppendTag(p.pkt, fPktSequenceFlags, protowire.VarintType)
	p.pkt = protowire.AppendVarint(p.pkt, seqIncrementalStateCleared)
	p.flush()
	return p
}

func (p *pfWriter) flush() {
	if p.err != nil {
		return
	}
	var hdr [16]byte
	h := protowire.AppendTag(hdr[:0], fTracePacket, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(p.pkt)))
	if _, p.err = p.w.Write(h); p.err == nil {
		_, p.err = p.w.Write(p.pkt)
	}
	p.Packets++
}

// Close flushes the buffer and returns the first error.
func (p *pfWriter) Close() error {
	if p.err != nil {
		return p.err
	}
	return p.w.Flush()
}

func appendStr(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// clean makes attacker-controlled text (process, thread, kernel names)
// printable: the trace is shown as text in the UI.
func pfClean(s string) string { return safetext.Clean(s) }

// trackKind says what a track describes.
type trackKind struct {
	pid, tid int // process (pid) or thread (pid, tid) track when set
	counter  bool
	unit     int // counter unit, 0 when unspecified
}

// track writes a TrackDescriptor and returns its uuid.
func (p *pfWriter) track(parent uint64, name string, k trackKind) uint64 {
	uuid := p.nextUUID
	p.nextUUID++
	m := appendUint(p.m[:0], fTdUUID, uuid)
	if parent != 0 {
		m = appendUint(m, fTdParent, parent)
	}
	if name != "" {
		m = appendStr(m, fTdName, pfClean(name))
	}
	var sub []byte
	switch {
	case k.tid != 0:
		sub = appendUint(sub, fThPID, uint64(k.pid))
		sub = appendUint(sub, fThTID, uint64(k.tid))
		sub = appendStr(sub, fThName, pfClean(name))
		m = protowire.AppendTag(m, fTdThread, protowire.BytesType)
		m = protowire.AppendBytes(m, sub)
	case k.pid != 0:
		sub = appendUint(sub, fPdPID, uint64(k.pid))
		sub = appendStr(sub, fPdName, pfClean(name))
		m = protowire.AppendTag(m, fTdProcess, protowire.BytesType)
		m = protowire.AppendBytes(m, sub)
	case k.counter:
		if k.unit != 0 {
			sub = appendUint(sub, fCdUnit, uint64(k.unit))
		}
		m = protowire.AppendTag(m, fTdCounter, protowire.BytesType)
		m = protowire.AppendBytes(m, sub)
	}
	p.m = m
	p.pkt = protowire.AppendTag(p.pkt[:0], fPktTrackDescriptor, protowire.BytesType)
	p.pkt = protowire.AppendBytes(p.pkt, m)
	p.flush()
	return uuid
}

// event writes one TrackEvent at ts (ns). name is interned: the first
// packet that names it carries it in its interned data.
func (p *pfWriter) event(ts int64, track uint64, typ uint64, name string, value float64, args []pfArg) {
	if ts < 0 {
		ts = 0
	}
	var interned []byte
	ev := appendUint(p.ev[:0], fEvType, typ)
	ev = appendUint(ev, fEvTrackUUID, track)
	if typ == evCounter {
		ev = protowire.AppendTag(ev, fEvDoubleCounter, protowire.Fixed64Type)
		ev = protowire.AppendFixed64(ev, math.Float64bits(value))
	}
	if name != "" {
		iid, ok := p.names[name]
		if !ok {
			iid = uint64(len(p.names) + 1)
			p.names[name] = iid
			en := appendUint(nil, fEnIID, iid)
			en = appendStr(en, fEnName, pfClean(name))
			interned = protowire.AppendTag(interned, fInEventNames, protowire.BytesType)
			interned = protowire.AppendBytes(interned, en)
		}
		ev = appendUint(ev, fEvNameIID, iid)
	}
	for _, a := range args {
		da := appendStr(p.m[:0], fDaName, a.Name)
		switch {
		case a.IsNum && a.Num == math.Trunc(a.Num) && math.Abs(a.Num) < 1<<53:
			da = appendUint(da, fDaInt, uint64(int64(a.Num)))
		case a.IsNum:
			da = protowire.AppendTag(da, fDaDouble, protowire.Fixed64Type)
			da = protowire.AppendFixed64(da, math.Float64bits(a.Num))
		default:
			da = appendStr(da, fDaString, pfClean(a.Str))
		}
		p.m = da
		ev = protowire.AppendTag(ev, fEvDebugAnnotations, protowire.BytesType)
		ev = protowire.AppendBytes(ev, da)
	}
	p.ev = ev
	pkt := appendUint(p.pkt[:0], fPktTimestamp, uint64(ts))
	pkt = protowire.AppendTag(pkt, fPktTrackEvent, protowire.BytesType)
	pkt = protowire.AppendBytes(pkt, ev)
	if interned != nil {
		pkt = protowire.AppendTag(pkt, fPktInternedData, protowire.BytesType)
		pkt = protowire.AppendBytes(pkt, interned)
	}
	pkt = appendUint(pkt, fPktSequenceID, sequenceID)
	pkt = appendUint(pkt, fPktSequenceFlags, seqNeedsIncrementalState)
	p.pkt = pkt
	p.flush()
}

func (p *pfWriter) counter(ts int64, track uint64, v float64) {
	p.event(ts, track, evCounter, "", v, nil)
}

func (p *pfWriter) slice(start, end int64, track uint64, name string, args []pfArg) {
	p.event(start, track, evSliceBegin, name, 0, args)
	p.event(end, track, evSliceEnd, "", 0, nil)
}

func (p *pfWriter) instant(ts int64, track uint64, name string, args []pfArg) {
	p.event(ts, track, evInstant, name, 0, args)
}

// counterSeries writes a counter track's values at their times, leaving out
// values not measured (NaN) and repeats of the value before (a counter holds
// its value until the next one, so a repeat adds nothing but size).
type counterSeries struct {
	p     *pfWriter
	track uint64
	last  float64
	have  bool
	N     int
}

func (c *counterSeries) add(ts int64, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if c.have && v == c.last {
		return
	}
	c.p.counter(ts, c.track, v)
	c.last, c.have = v, true
	c.N++
}
