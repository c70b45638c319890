// Package devchan finds the descriptors through which a process talks to a
// GPU: the /dev/nvidia* nodes it holds open (the CUDA driver's channels on a
// real host) and the Unix sockets it has connected to a simulated device
// (gpufeed simdev). A thread blocked on one of these waits on the device: a
// synchronisation, a blocking copy, a full launch queue. The rules use that
// to tell a launch thread waiting on the GPU from one waiting on its input.
//
// Descriptors are read under an injectable /proc (procfs.FS). Which socket a
// Unix socket is connected to is not in /proc: the kernel's sock_diag
// netlink interface says it (what `ss -x` shows as the peer), for the
// network namespace gpufeed runs in.
package devchan

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// UnixSocket is one Unix socket as sock_diag reports it.
type UnixSocket struct {
	Inode uint64
	// Path is the address it is bound to ("" when unbound). Sockets a
	// listener accepted carry the listener's path.
	Path string
	// Peer is the inode of the socket it is connected to (0 when none).
	Peer uint64
}

// Prober reads device channels. The socket table is read once, on first
// need, and reused for every process.
type Prober struct {
	fs procfs.FS
	// SimPaths are the socket paths of the simulated devices in use.
	simPaths map[string]bool
	// ListUnix returns the host's Unix sockets by inode; tests replace it.
	ListUnix func() (map[uint64]UnixSocket, error)

	socks    map[uint64]UnixSocket
	sockErr  error
	sockRead bool
}

// New returns a prober over fs that recognises sockets connected to any of
// simPaths (the simulated devices' socket paths; none on a real host).
func New(fs procfs.FS, simPaths ...string) *Prober {
	p := &Prober{fs: fs, simPaths: map[string]bool{}, ListUnix: ListUnixSockets}
	for _, s := range simPaths {
		if s != "" {
			p.simPaths[s] = true
		}
	}
	return p
}

// Result is what was found for one process.
type Result struct {
	// Channels are the fd targets ("/dev/nvidia0", "socket:[4242]"), sorted
	// and without duplicates.
	Channels []string
	// NotVisible says why some could not be told (the fd table denied, the
	// socket table unreadable); empty when everything was seen.
	NotVisible string
}

// Channels lists pid's device channels. A vanished process returns an
// error for which procfs.IsVanished is true.
func (p *Prober) Channels(pid int) (Result, error) {
	var res Result
	dir := p.fs.PidPath(pid, "fd")
	f, err := os.Open(dir)
	if err == nil {
		var names []string
		names, err = f.Readdirnames(-1)
		f.Close()
		if err == nil {
			p.scan(pid, names, &res)
			return res, nil
		}
	}
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		res.NotVisible = "fd table not visible: " + procfs.PrivPtraceRead
		return res, nil
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ESRCH):
		return res, fmt.Errorf("%s: %w", dir, procfs.ErrVanished)
	}
	return res, fmt.Errorf("%s: %w", dir, err)
}

func (p *Prober) scan(pid int, names []string, res *Result) {
	seen := map[string]bool{}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		target, err := p.fs.FDTarget(pid, fd)
		if err != nil {
			continue // closed meanwhile, or denied like the table itself
		}
		if p.isChannel(target, res) && !seen[target] {
			seen[target] = true
			res.Channels = append(res.Channels, target)
		}
	}
	sort.Strings(res.Channels)
}

func (p *Prober) isChannel(target string, res *Result) bool {
	if gpu.IsNVIDIANode(target) {
		return true
	}
	ino, ok := SocketInode(target)
	if !ok || len(p.simPaths) == 0 {
		return false
	}
	if !p.sockRead {
		p.sockRead = true
		p.socks, p.sockErr = p.ListUnix()
	}
	if p.sockErr != nil {
		res.NotVisible = "which sockets lead to the simulated device: " + p.sockErr.Error()
		return false
	}
	s, ok := p.socks[ino]
	if !ok || s.Peer == 0 {
		return false
	}
	peer, ok := p.socks[s.Peer]
	return ok && p.simPaths[peer.Path]
}

// SocketInode parses "socket:[4242]".
func SocketInode(target string) (uint64, bool) {
	s, ok := strings.CutPrefix(target, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}
