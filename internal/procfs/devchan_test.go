package procfs

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// fixture builds ROOT/PID/fd with the given links.
func channelFixture(t *testing.T, pid int, links map[int]string) FS {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(pid), "fd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for fd, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, strconv.Itoa(fd))); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := NewFS(root, "")
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestChannelsFixture(t *testing.T) {
	fs := channelFixture(t, 42, map[int]string{
		0: "/dev/null", 3: "/dev/nvidiactl", 4: "/dev/nvidia0", 5: "/dev/nvidia0",
		6: "socket:[100]", 7: "socket:[200]", 8: "pipe:[300]", 9: "socket:[400]",
	})
	p := NewChannelProber(fs, "/run/sim.sock")
	p.ListUnix = func() (map[uint64]UnixSocket, error) {
		return map[uint64]UnixSocket{
			100: {Inode: 100, Peer: 101},                          // connected to the device
			101: {Inode: 101, Path: "/run/sim.sock", Peer: 100},   // the device's accepted end
			200: {Inode: 200, Peer: 201},                          // connected elsewhere
			201: {Inode: 201, Path: "/run/other.sock", Peer: 200}, // another server
			400: {Inode: 400},                                     // unconnected
		}, nil
	}
	res, err := p.Channels(42)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/dev/nvidia0", "/dev/nvidiactl", "socket:[100]"}
	if !slices.Equal(res.Channels, want) || res.NotVisible != "" {
		t.Errorf("got %q (%q), want %q", res.Channels, res.NotVisible, want)
	}
}

func TestChannelsWithoutSimPathNeverReadsSockets(t *testing.T) {
	fs := channelFixture(t, 42, map[int]string{3: "socket:[100]", 4: "/dev/nvidia-uvm"})
	p := NewChannelProber(fs)
	p.ListUnix = func() (map[uint64]UnixSocket, error) {
		t.Error("socket table read on a host with no simulated device")
		return nil, nil
	}
	res, err := p.Channels(42)
	if err != nil || !slices.Equal(res.Channels, []string{"/dev/nvidia-uvm"}) {
		t.Errorf("got %q, %v", res.Channels, err)
	}
}

func TestChannelsSocketTableUnreadable(t *testing.T) {
	fs := channelFixture(t, 42, map[int]string{3: "socket:[100]"})
	p := NewChannelProber(fs, "/run/sim.sock")
	p.ListUnix = func() (map[uint64]UnixSocket, error) { return nil, os.ErrPermission }
	res, err := p.Channels(42)
	if err != nil || len(res.Channels) != 0 || res.NotVisible == "" {
		t.Errorf("got %q, not visible %q, err %v; want none, a reason", res.Channels, res.NotVisible, err)
	}
}

func TestChannelsVanished(t *testing.T) {
	fs := channelFixture(t, 42, nil)
	_, err := NewChannelProber(fs).Channels(43)
	if !IsVanished(err) {
		t.Errorf("err %v: want vanished", err)
	}
}

// TestChannelsLive connects a Unix socket to a listener in this process and
// finds it through the real /proc and sock_diag.
func TestChannelsLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	socks, err := ListUnixSockets()
	if err != nil {
		t.Skipf("sock_diag not available here: %v", err)
	}
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	client := "socket:[" + strconv.FormatUint(fi.Sys().(*syscall.Stat_t).Ino, 10) + "]"
	fs, err := NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewChannelProber(fs, path).Channels(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Channels, []string{client}) {
		t.Fatalf("channels %q, want the client end %s (of %d sockets)", res.Channels, client, len(socks))
	}
}

func TestParseUnixDiagMsg(t *testing.T) {
	msg := make([]byte, unixDiagMsgLen)
	msg[0] = 1
	binary.LittleEndian.PutUint32(msg[4:], 4242)
	attr := func(typ uint16, v []byte) []byte {
		a := make([]byte, 4, 4+len(v)+3)
		binary.LittleEndian.PutUint16(a[0:], uint16(4+len(v)))
		binary.LittleEndian.PutUint16(a[2:], typ)
		a = append(a, v...)
		for len(a)%4 != 0 {
			a = append(a, 0)
		}
		return a
	}
	peer := make([]byte, 4)
	binary.LittleEndian.PutUint32(peer, 77)
	b := append(msg, attr(unixDiagName, []byte("/tmp/x.sock"))...)
	b = append(b, attr(1, []byte{9, 9, 9, 9, 9, 9, 9, 9})...) // UNIX_DIAG_VFS: skipped
	b = append(b, attr(unixDiagPeer, peer)...)
	s, ok := parseUnixDiagMsg(b)
	if !ok || s != (UnixSocket{Inode: 4242, Path: "/tmp/x.sock", Peer: 77}) {
		t.Errorf("got %+v, %v", s, ok)
	}
	if s, _ := parseUnixDiagMsg(append(msg[:unixDiagMsgLen:unixDiagMsgLen], attr(unixDiagName, []byte("\x00abstract"))...)); s.Path != "@abstract" {
		t.Errorf("abstract name %q, want @abstract", s.Path)
	}
	if _, ok := parseUnixDiagMsg(msg[:8]); ok {
		t.Error("short message accepted")
	}
}

// FuzzParseDump feeds arbitrary datagrams to the sock_diag parser: it must
// never panic.
func FuzzParseDump(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{20, 0, 0, 0, 3, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(append([]byte{36, 0, 0, 0, 20, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 146, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		8, 0, 2, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		out := map[uint64]UnixSocket{}
		_, _ = parseDump(b, out)
	})
}
