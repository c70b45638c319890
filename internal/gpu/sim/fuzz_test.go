package sim_test

import (
	"net"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu/sim"
	"github.com/gpufeed/gpufeed/internal/gpu/sim/wire"
)

func frame(r wire.Request) []byte {
	var b [wire.FrameSize]byte
	r.Encode(b[:])
	return b[:]
}

// FuzzServerInput feeds arbitrary bytes to the server as a client would: it
// must refuse or ignore them, never crash, and keep serving others.
func FuzzServerInput(f *testing.F) {
	hello := frame(wire.Request{Op: wire.OpHello, Arg: wire.Version, TS: wire.Now()})
	f.Add(hello)
	f.Add(append(append([]byte{}, hello...), frame(wire.Request{Op: wire.OpLaunch, Arg: 1000})...))
	f.Add(append(append([]byte{}, hello...), frame(wire.Request{Op: wire.OpMemcpy, Kind: 9, Arg: 1})...))
	f.Add(append(append([]byte{}, hello...), frame(wire.Request{Op: wire.OpSample})...))
	f.Add(frame(wire.Request{Op: wire.OpHello, Kind: wire.RoleObserver, Arg: 99}))
	f.Add(append(frame(wire.Request{Op: wire.OpHello, Kind: wire.RoleObserver, Arg: wire.Version}), frame(wire.Request{Op: wire.OpLaunch})...))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	path := startDevice(f, sim.Options{})
	src, err := sim.Dial(path)
	if err != nil {
		f.Fatal(err)
	}
	defer src.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b)
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		var sink [4096]byte
		c.Read(sink[:])
		c.Close()
		ss, err := src.Sample()
		if err != nil || len(ss) != 1 || ss[0].Lost != "" {
			t.Fatalf("after input %x the server stopped answering: %v %+v", b, err, ss)
		}
	})
}
