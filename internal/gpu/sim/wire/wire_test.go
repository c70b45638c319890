package wire

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRequestRoundTrip(t *testing.T) {
	r := Request{Op: OpMemcpy, Flags: FlagPinned | FlagReply, Kind: CopyD2H, Stream: 7, TS: 123456789, Arg: 1 << 33, Seq: 42}
	var b [FrameSize]byte
	r.Encode(b[:])
	if got := DecodeRequest(b[:]); got != r {
		t.Fatalf("round trip: %+v, want %+v", got, r)
	}
	// The layout is the documented one (docs/SIMDEV.md; the Python client packs "<BBBBIqQQ").
	want := []byte{3, 3, 1, 0, 7, 0, 0, 0, 0x15, 0xcd, 0x5b, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("encoding %v, want %v", b, want)
	}
}

func TestReplyWithPayload(t *testing.T) {
	var buf bytes.Buffer
	buf.Write(AppendReply(nil, Reply{Op: OpSample, Time: 99, Seq: 5}, []byte(`[{"index":0}]`)))
	buf.Write(AppendReply(nil, Reply{Op: OpSync, Time: 100, Seq: 6}, nil))
	r, p, err := ReadReply(&buf)
	if err != nil || r.Op != OpSample || r.Seq != 5 || string(p) != `[{"index":0}]` {
		t.Fatalf("first reply %+v %q %v", r, p, err)
	}
	r, p, err = ReadReply(&buf)
	if err != nil || r.Op != OpSync || r.Time != 100 || p != nil {
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
