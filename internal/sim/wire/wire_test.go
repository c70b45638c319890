package wire

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRequestRoundTrip(t *testing.T) {
	r := Request{Op: OpHello, Flags: 3, Kind: RoleWaiter, Stream: 7, TS: 123456789, Arg: 1 << 33, Seq: 42}
	var b [FrameSize]byte
	r.Encode(b[:])
	if got := DecodeRequest(b[:]); got != r {
		t.Fatalf("round trip: %+v, want %+v", got, r)
	}
	// The layout is the documented one (docs/SIMDEV.md; the Python client packs "<BBBBIqQQ").
	want := []byte{1, 3, 2, 0, 7, 0, 0, 0, 0x15, 0xcd, 0x5b, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("encoding %v, want %v", b, want)
	}
}

func TestReplyWithPayload(t *testing.T) {
	var buf bytes.Buffer
	buf.Write(AppendReply(nil, Reply{Op: OpSample, Time: 99, Seq: 5}, []byte(`[{"index":0}]`)))
	buf.Write(AppendReply(nil, Reply{Op: OpWait, Time: 100, Seq: 6}, nil))
	r, p, err := ReadReply(&buf)
	if err != nil || r.Op != OpSample || r.Seq != 5 || string(p) != `[{"index":0}]` {
		t.Fatalf("first reply %+v %q %v", r, p, err)
	}
	r, p, err = ReadReply(&buf)
	if err != nil || r.Op != OpWait || r.Time != 100 || p != nil {
		t.Fatalf("second reply %+v %q %v", r, p, err)
	}
	if _, _, err := ReadReply(&buf); err != io.EOF {
		t.Fatalf("at the end: %v, want EOF", err)
	}
}

func TestReplyRejectsOversizedAndTruncated(t *testing.T) {
	var h [FrameSize]byte
	Reply{Op: OpSample, PayloadLen: MaxPayload + 1}.Encode(h[:])
	if _, _, err := ReadReply(bytes.NewReader(h[:])); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("oversized payload: %v", err)
	}
	b := AppendReply(nil, Reply{Op: OpInfo}, []byte("0123456789"))
	if _, _, err := ReadReply(bytes.NewReader(b[:len(b)-3])); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated payload: %v, want unexpected EOF", err)
	}
}

func TestClockConversions(t *testing.T) {
	m := Now()
	w := Wall(m)
	if d := time.Since(w); d < 0 || d > time.Second {
		t.Fatalf("Wall(Now()) is %v from time.Now()", d)
	}
	if back := Mono(w); back != m {
		t.Fatalf("Mono(Wall(%d)) = %d", m, back)
	}
}

func FuzzReadReply(f *testing.F) {
	f.Add(AppendReply(nil, Reply{Op: OpSample, Seq: 1}, []byte("{}")))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, p, err := ReadReply(bytes.NewReader(b))
		if err == nil && int(r.PayloadLen) != len(p) {
			t.Fatalf("payload of %d bytes, header says %d", len(p), r.PayloadLen)
		}
	})
}

func TestRegistrationRoundTrip(t *testing.T) {
	r := Registration{Device: 1, Devices: 2, PID: 4242, ClockOffsetNS: -7, ID: 9, MaxPending: 1024, RingCapacity: 32768,
		Bandwidth: [3]float64{25.2e9, 25.2e9, 1.5e12}, PageableFactor: 0.5, LaunchCostNS: 5000, MemTotalBytes: 80 << 30,
		Name: "gpufeed simulated GPU"}
	b := r.Encode()
	if len(b) != RegistrationSize {
		t.Fatalf("%d bytes, want %d", len(b), RegistrationSize)
	}
	got, err := DecodeRegistration(b)
	if err != nil || got != r {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, r)
	}
	// The offsets the C library reads (gpufeed_simcuda.c, ctx_register).
	if b[0] != 'G' || b[1] != 'F' || b[2] != 'S' || b[3] != 'R' || b[16] != 0x92 || b[17] != 0x10 || b[40] != 0 || b[41] != 4 {
		t.Fatalf("layout %x", b[:48])
	}
	b[4] = 1
	if _, err := DecodeRegistration(b); err == nil {
		t.Fatal("a registration of protocol 1 was accepted")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Start: 1e9, End: 1e9 + 5000, Bytes: 1 << 20, Stream: 3, Kind: KindH2D, Flags: RecordPinned, Count: 1}
	var b [RecordSize]byte
	r.Encode(b[:])
	if got := DecodeRecord(b[:]); got != r {
		t.Fatalf("round trip %+v, want %+v", got, r)
	}
	if b[28] != KindH2D || b[30] != 1 || b[24] != 3 {
		t.Fatalf("layout %x", b)
	}
	if RingBytes(32768)%4096 != 0 || RingBytes(1) != 4096 {
		t.Fatalf("ring sizes %d %d", RingBytes(32768), RingBytes(1))
	}
}
