package procfs

import (
	"errors"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// The descriptors through which a process talks to a
// GPU: the /dev/nvidia* nodes it holds open (the CUDA driver's channels on a
// real host) and the Unix sockets it has connected to a simulated device
// (gpufeed simdev). A thread blocked on one of these waits on the device: a
// synchronisation, a blocking copy, a full launch queue. The rules use that
// to tell a launch thread waiting on the GPU from one waiting on its input.
//
// Descriptors are read under an injectable /proc (FS). Which socket a
// Unix socket is connected to is not in /proc: the kernel's sock_diag
// netlink interface says it (what `ss -x` shows as the peer), for the
// network namespace gpufeed runs in.

// UnixSocket is one Unix socket as sock_diag reports it.
type UnixSocket struct {
	Inode uint64
	// Path is the address it is bound to ("" when unbound). Sockets a
	// listener accepted carry the listener's path.
	Path string
	// Peer is the inode of the socket it is connected to (0 when none).
	Peer uint64
}

// ChannelProber reads device channels. The socket table is read once, on first
// need, and reused for every process.
type ChannelProber struct {
	fs FS
	// SimPaths are the socket paths of the simulated devices in use.
	simPaths map[string]bool
	// ListUnix returns the host's Unix sockets by inode; tests replace it.
	ListUnix func() (map[uint64]UnixSocket, error)

	socks    map[uint64]UnixSocket
	sockErr  error
	sockRead bool
}

// NewChannelProber returns a prober over fs that recognises sockets connected to any of
// simPaths (the simulated devices' socket paths; none on a real host).
func NewChannelProber(fs FS, simPaths ...string) *ChannelProber {
	p := &ChannelProber{fs: fs, simPaths: map[string]bool{}, ListUnix: ListUnixSockets}
	for _, s := range simPaths {
		if s != "" {
			p.simPaths[s] = true
		}
	}
	return p
}

// DeviceChannels is what was found for one process.
type DeviceChannels struct {
	// Channels are the fd targets ("/dev/nvidia0", "socket:[4242]"), sorted
	// and without duplicates.
	Channels []string
	// NotVisible says why some could not be told (the fd table denied, the
	// socket table unreadable); empty when everything was seen.
	NotVisible string
}

// Channels lists pid's device channels. A vanished process returns an
// error for which IsVanished is true.
func (p *ChannelProber) Channels(pid int) (DeviceChannels, error) {
	var res DeviceChannels
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
		res.NotVisible = "fd table not visible: " + PrivPtraceRead
		return res, nil
	}
	return res, classify(dir, PrivPtraceRead, ErrVanished, err)
}

func (p *ChannelProber) scan(pid int, names []string, res *DeviceChannels) {
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

func (p *ChannelProber) isChannel(target string, res *DeviceChannels) bool {
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
