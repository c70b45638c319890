package procfs

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The fixtures are this machine's tables as a process saw them
// (testdata/net/{tcp,tcp6,unix}, read from /proc/PID/net on Linux 6.18,
// x86-64): three TCP listeners, one TCP6 listener, two listening Unix
// sockets among connected ones.

func netTable(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "net", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseTCP(t *testing.T) {
	got, err := ParseTCP("tcp", netTable(t, "tcp"), false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{1145: "0.0.0.0:2024", 72831: "127.0.0.1:38305", 56292: "127.0.0.1:55157"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v (connected sockets left out)", got, want)
	}
	got, err = ParseTCP("tcp6", netTable(t, "tcp6"), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[298891] != "[::]:36263" {
		t.Errorf("tcp6: %v", got)
	}
	// ::1 and an IPv4-mapped address, as the kernel prints them on x86-64.
	v6 := "  sl  local_address                         remote_address                        st\n" +
		"   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 11 1\n" +
		"   1: 0000000000000000FFFF00000100007F:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12 1\n"
	got, err = ParseTCP("tcp6", []byte(v6), true)
	if err != nil || got[11] != "[::1]:8080" || got[12] != "127.0.0.1:8081" {
		t.Errorf("v6 addresses: %v %v", got, err)
	}
}

func TestParseTCPBadLine(t *testing.T) {
	b := "  sl  local_address rem_address   st\n   0: 0100007F:95A1 00000000:0000 0A 0 0 0 0 0 77 1\n   1: zz\n   2: XYZ:1 00000000:0000 0A 0 0 0 0 0 78 1\n"
	got, err := ParseTCP("/proc/9/net/tcp", []byte(b), false)
	if len(got) != 1 || got[77] != "127.0.0.1:38305" {
		t.Errorf("what parsed must be kept: %v", got)
	}
	if err == nil || err.Error() != `/proc/9/net/tcp: line 3: expected "sl: local_address rem_address st ... uid timeout inode"` {
		t.Errorf("error %v", err)
	}
}

func TestParseUnix(t *testing.T) {
	got, err := ParseUnix("unix", netTable(t, "unix"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{35554: "/tmp/tl/gpu.sock", 334679: "/tmp/gpufeed-demo-323046029/gpu.sock"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	b := "Num       RefCount Protocol Flags    Type St Inode Path\n" +
		"0000000000000000: 00000002 00000000 00010000 0005 01 41 @gpufeed abstract\n" +
		"0000000000000000: 00000002 00000000 00010000 0002 01 42 /tmp/dgram\n" +
		"0000000000000000: 00000002 00000000 00010000 0001 01 43\n" +
		"0000000000000000: 00000002 00000000 00010000 0001\n"
	got, err = ParseUnix("unix", []byte(b))
	if got[41] != "@gpufeed abstract" || got[43] != "" || len(got) != 2 {
		t.Errorf("seqpacket with a spaced abstract name, datagram left out, unnamed listener: %v", got)
	}
	if err == nil || !strings.Contains(err.Error(), "unix: line 5: expected") {
		t.Errorf("error %v", err)
	}
}

// TestListeningLive listens on a TCP port and a Unix socket in this process and
// finds both, and nothing for a process that listens on nothing.
func TestListeningLive(t *testing.T) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer tl.Close()
	path := filepath.Join(t.TempDir(), "l.sock")
	ul, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	conn, err := net.Dial("tcp", tl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := At("", "").Listening(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.String())
	}
	want := []string{"tcp " + tl.Addr().String(), "unix " + path}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("got %v, want %v (the connected socket is not listening)", names, want)
	}
	if got, err := At("", "").Listening(1 << 30); !errors.Is(err, ErrVanished) || got != nil {
		t.Errorf("a gone process: %v %v", got, err)
	}
}

func FuzzParseTables(f *testing.F) {
	for _, name := range []string{"tcp", "tcp6", "unix"} {
		b, err := os.ReadFile(filepath.Join("testdata", "net", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("h\n 0: 0100007F:95A1 00000000:0000 0A 0 0 0 0 0 77 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseTCP("tcp", b, false)
		_, _ = ParseTCP("tcp6", b, true)
		_, _ = ParseUnix("unix", b)
	})
}

// TestListeningSharedTables: with NetTables, one read of a namespace's
// tables serves every call until it expires; then the tables are read again.
func TestListeningSharedTables(t *testing.T) {
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer first.Close()
	fs := At("", "")
	now := time.Now()
	fs.NetTables = NewNetTables(10 * time.Second)
	fs.NetTables.now = func() time.Time { return now }
	count := func() int {
		got, err := fs.Listening(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range got {
			if s.Proto == "tcp" {
				n++
			}
		}
		return n
	}
	if n := count(); n != 1 {
		t.Fatalf("%d TCP listeners, want 1", n)
	}
	second, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	now = now.Add(5 * time.Second)
	if n := count(); n != 1 {
		t.Errorf("within the TTL: %d TCP listeners, want the table read before (1)", n)
	}
	now = now.Add(6 * time.Second)
	if n := count(); n != 2 {
		t.Errorf("after the TTL: %d TCP listeners, want 2", n)
	}
	if len(fs.NetTables.by) != 1 {
		t.Errorf("%d namespaces kept, want this one", len(fs.NetTables.by))
	}
}
