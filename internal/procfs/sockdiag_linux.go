package procfs

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"
)

// sock_diag constants (linux/sock_diag.h, linux/unix_diag.h).
const (
	netlinkSockDiag  = 4  // NETLINK_SOCK_DIAG
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	udiagShowName    = 0x01
	udiagShowPeer    = 0x04
	unixDiagName     = 0 // UNIX_DIAG_NAME attribute
	unixDiagPeer     = 2 // UNIX_DIAG_PEER attribute
	unixDiagMsgLen   = 16
	unixDiagReqLen   = 24
	// maxDumpBytes bounds what one dump may make us read: a host with a
	// million Unix sockets answers in about 50 MB.
	maxDumpBytes = 256 << 20
)

// ListUnixSockets asks the kernel (sock_diag, as `ss -x` does) for every
// Unix socket of gpufeed's network namespace, with its bound path and the
// inode of its peer.
func ListUnixSockets() (map[uint64]UnixSocket, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return nil, fmt.Errorf("sock_diag netlink socket: %w", err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag bind: %w", err)
	}
	req := make([]byte, syscall.NLMSG_HDRLEN+unixDiagReqLen)
	le := binary.LittleEndian
	le.PutUint32(req[0:], uint32(len(req)))
	le.PutUint16(req[4:], sockDiagByFamily)
	le.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	le.PutUint32(req[8:], 1) // sequence
	b := req[syscall.NLMSG_HDRLEN:]
	b[0] = syscall.AF_UNIX
	le.PutUint32(b[4:], 0xffffffff) // every state
	le.PutUint32(b[12:], udiagShowName|udiagShowPeer)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag request: %w", err)
	}
	out := map[uint64]UnixSocket{}
	buf := make([]byte, 1<<16)
	total := 0
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag dump: %w", err)
		}
		if total += n; total > maxDumpBytes {
			return nil, fmt.Errorf("sock_diag dump: more than %d bytes", maxDumpBytes)
		}
		done, err := parseDump(buf[:n], out)
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
}

// parseDump adds the sockets of one netlink datagram to out; done is true
// at the dump's end.
func parseDump(b []byte, out map[uint64]UnixSocket) (done bool, err error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return false, fmt.Errorf("sock_diag dump: %w", err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case syscall.NLMSG_DONE:
			return true, nil
		case syscall.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if errno := int32(binary.LittleEndian.Uint32(m.Data)); errno != 0 {
					return false, fmt.Errorf("sock_diag dump: %w", os.NewSyscallError("netlink", syscall.Errno(-errno)))
				}
			}
			return true, nil
		case sockDiagByFamily:
			if s, ok := parseUnixDiagMsg(m.Data); ok {
				out[s.Inode] = s
			}
		}
	}
	return false, nil
}

// parseUnixDiagMsg reads struct unix_diag_msg and its attributes.
func parseUnixDiagMsg(b []byte) (UnixSocket, bool) {
	if len(b) < unixDiagMsgLen {
		return UnixSocket{}, false
	}
	le := binary.LittleEndian
	s := UnixSocket{Inode: uint64(le.Uint32(b[4:]))}
	for a := b[unixDiagMsgLen:]; len(a) >= 4; {
		l, typ := int(le.Uint16(a[0:])), le.Uint16(a[2:])
		if l < 4 || l > len(a) {
			break
		}
		v := a[4:l]
		switch typ {
		case unixDiagName:
			s.Path = socketPath(v)
		case unixDiagPeer:
			if len(v) >= 4 {
				s.Peer = uint64(le.Uint32(v))
			}
		}
		a = a[min(len(a), (l+3)&^3):]
	}
	return s, true
}

// socketPath turns a sun_path as the kernel reports it into a string: a
// filesystem path is NUL-terminated or not; an abstract name starts with NUL
// and is shown with a leading '@', as ss does.
func socketPath(v []byte) string {
	if len(v) > 0 && v[0] == 0 {
		return "@" + string(v[1:])
	}
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}
