package procfs

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The listening sockets a process holds: TCP and TCP6
// sockets in the LISTEN state and Unix stream or seqpacket sockets that
// accept connections. A process holding one and blocked in accept, or in an
// event loop's poll or epoll_wait, is waiting for requests: a server with
// nothing to do is idle, not frozen.
//
// The socket tables are the process's own network namespace's
// (PROC/PID/net/tcp, tcp6, unix), matched by inode against its descriptors
// (PROC/PID/fd). Only reads; the tables hold no payload, only addresses.

// ListenSocket is one listening socket of a process.
type ListenSocket struct {
	// Proto is "tcp", "tcp6" or "unix".
	Proto string
	// Addr is where it listens: "127.0.0.1:8000", "[::]:8000", a path, or
	// "@name" for an abstract Unix socket ("" for an unnamed one).
	Addr  string
	Inode uint64
}

// String is "tcp 127.0.0.1:8000", "unix /run/x.sock".
func (s ListenSocket) String() string {
	if s.Addr == "" {
		return s.Proto + " (unnamed)"
	}
	return s.Proto + " " + s.Addr
}

// maxTable bounds one socket table read: a host with a million
// connections has a 150 MB table; the listening sockets come first in
// practice, but nothing guarantees it, so what was not read is said.
const maxTable = 16 << 20

// Listening returns the listening sockets pid holds,
// sorted by protocol and address. A table that cannot be read (no IPv6, a
// kernel without Unix socket diagnostics) is skipped; a table cut at the
// size bound is read as far as it went.
func (fs FS) Listening(pid int) ([]ListenSocket, error) {
	dir := fs.ProcPath(PIDDir(pid))
	inodes, err := socketInodes(filepath.Join(dir, "fd"))
	if err != nil || len(inodes) == 0 {
		return nil, err
	}
	var cached *nsTables
	if fs.NetTables != nil {
		if ns, err := os.Readlink(filepath.Join(dir, "ns", "net")); err == nil {
			cached = fs.NetTables.get(ns)
		}
	}
	var out []ListenSocket
	for i, t := range []struct {
		file  string
		parse func(string, []byte) (map[uint64]string, error)
		proto string
	}{
		{"tcp", func(f string, b []byte) (map[uint64]string, error) { return ParseTCP(f, b, false) }, "tcp"},
		{"tcp6", func(f string, b []byte) (map[uint64]string, error) { return ParseTCP(f, b, true) }, "tcp6"},
		{"unix", ParseUnix, "unix"},
	} {
		listening, ok := fs.NetTables.lookup(cached, i)
		if !ok {
			path := filepath.Join(dir, "net", t.file)
			b, _, err := readPrefix(path, PrivPtraceRead, ErrAbsent, maxTable)
			if err != nil {
				continue
			}
			listening, err = t.parse(path, b)
			if err != nil && len(listening) == 0 {
				continue
			}
			fs.NetTables.store(cached, i, listening)
		}
		for ino, addr := range listening {
			if inodes[ino] {
				out = append(out, ListenSocket{Proto: t.proto, Addr: addr, Inode: ino})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Proto != out[j].Proto {
			return out[i].Proto < out[j].Proto
		}
		if out[i].Addr != out[j].Addr {
			return out[i].Addr < out[j].Addr
		}
		return out[i].Inode < out[j].Inode
	})
	return out, nil
}

// socketInodes lists the inodes of the sockets pid holds open.
func socketInodes(fdDir string) (map[uint64]bool, error) {
	f, err := os.Open(fdDir)
	if err != nil {
		return nil, classify(fdDir, PrivPtraceRead, ErrVanished, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(MaxFDs)
	if err != nil && len(names) == 0 {
		return nil, classify(fdDir, PrivPtraceRead, ErrVanished, err)
	}
	out := map[uint64]bool{}
	for _, n := range names {
		target, err := os.Readlink(filepath.Join(fdDir, n))
		if err != nil {
			continue // closed since the listing
		}
		if ino, ok := SocketInode(target); ok {
			out[ino] = true
		}
	}
	return out, nil
}

// tcpListen is the LISTEN state in /proc/net/tcp (include/net/tcp_states.h).
const tcpListen = "0A"

// ParseTCP reads a /proc/net/tcp (or tcp6, v6 set) table and returns the
// sockets in the LISTEN state by inode, with their local address. The
// first line is the header. Lines that do not parse are skipped and the
// first such is returned as the error, with what was read.
func ParseTCP(file string, b []byte, v6 bool) (map[uint64]string, error) {
	out := map[uint64]string{}
	var first error
	for i, line := range strings.Split(string(b), "\n") {
		if i == 0 || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 10 || !strings.HasSuffix(f[0], ":") {
			if first == nil {
				first = &ParseError{File: file, Line: i + 1, Offset: -1, Want: `"sl: local_address rem_address st ... uid timeout inode"`}
			}
			continue
		}
		if f[3] != tcpListen {
			continue
		}
		addr, ok := tcpAddr(f[1], v6)
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if !ok || err != nil {
			if first == nil {
				first = &ParseError{File: file, Line: i + 1, Offset: -1, Want: "a hex address:port and a decimal inode"}
			}
			continue
		}
		out[ino] = addr
	}
	return out, first
}

// tcpAddr decodes "0100007F:1F90" (IPv4) or 32 hex digits ":port" (IPv6).
// The kernel prints each 32-bit word of the address as a number in the
// host's byte order; the port is in network order already.
func tcpAddr(s string, v6 bool) (string, bool) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return "", false
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return "", false
	}
	words := 1
	if v6 {
		words = 4
	}
	if len(host) != 8*words {
		return "", false
	}
	raw := make([]byte, 4*words)
	for w := 0; w < words; w++ {
		v, err := strconv.ParseUint(host[8*w:8*w+8], 16, 32)
		if err != nil {
			return "", false
		}
		binary.NativeEndian.PutUint32(raw[4*w:], uint32(v))
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)).String(), true
}

// Unix socket table values (include/linux/net.h): __SO_ACCEPTCON marks a
// socket that listen() was called on; types 1 stream, 5 seqpacket.
const (
	soAcceptCon     = 0x10000
	sockStream      = 1
	sockSeqpacket   = 5
	unixTableFields = 7
)

// ParseUnix reads a /proc/net/unix table and returns the listening stream
// and seqpacket sockets by inode, with their path ("@name" for an abstract
// address, "" for none).
func ParseUnix(file string, b []byte) (map[uint64]string, error) {
	out := map[uint64]string{}
	var first error
	for i, line := range strings.Split(string(b), "\n") {
		if i == 0 || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < unixTableFields || !strings.HasSuffix(f[0], ":") {
			if first == nil {
				first = &ParseError{File: file, Line: i + 1, Offset: -1, Want: `"Num: RefCount Protocol Flags Type St Inode [Path]"`}
			}
			continue
		}
		flags, err1 := strconv.ParseUint(f[3], 16, 32)
		typ, err2 := strconv.ParseUint(f[4], 16, 16)
		ino, err3 := strconv.ParseUint(f[6], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			if first == nil {
				first = &ParseError{File: file, Line: i + 1, Offset: -1, Want: "hex flags and type and a decimal inode"}
			}
			continue
		}
		if flags&soAcceptCon == 0 || (typ != sockStream && typ != sockSeqpacket) {
			continue
		}
		path := ""
		if len(f) > unixTableFields {
			// The path is the rest of the line (it may hold spaces).
			idx := strings.Index(line, " "+f[6]+" ")
			if idx >= 0 {
				path = strings.TrimSpace(line[idx+len(f[6])+2:])
			} else {
				path = strings.Join(f[unixTableFields:], " ")
			}
		}
		out[ino] = path
	}
	return out, first
}

// NetTables keeps the listening sockets of each network namespace's
// tables (tcp, tcp6, unix) for TTL after they were read: a listening
// socket opened since is seen once it expires. Memory stays bounded: a
// namespace's entry is dropped once expired.
type NetTables struct {
	TTL time.Duration
	mu  sync.Mutex
	by  map[string]*nsTables
	now func() time.Time
}

type nsTables struct {
	at     time.Time
	tables [3]map[uint64]string
	have   [3]bool
}

// NewNetTables shares socket tables for ttl.
func NewNetTables(ttl time.Duration) *NetTables {
	return &NetTables{TTL: ttl, by: map[string]*nsTables{}, now: time.Now}
}

// get is the namespace's entry, fresh when none is or it expired. The
// entry is filled by the caller; two callers at once may both read a table
// (each fills it with what it read).
func (c *NetTables) get(ns string) *nsTables {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, e := range c.by {
		if now.Sub(e.at) > c.TTL {
			delete(c.by, k)
		}
	}
	e := c.by[ns]
	if e == nil {
		e = &nsTables{at: now}
		c.by[ns] = e
	}
	return e
}

// lookup returns table i of an entry, if it was read (c and e may be nil).
func (c *NetTables) lookup(e *nsTables, i int) (map[uint64]string, bool) {
	if c == nil || e == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.tables[i], e.have[i]
}

// store keeps table i of an entry (c and e may be nil).
func (c *NetTables) store(e *nsTables, i int, m map[uint64]string) {
	if c == nil || e == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e.tables[i], e.have[i] = m, true
}
