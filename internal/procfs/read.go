package procfs

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrTooLarge is wrapped when a pseudo-file is larger than the cap its reader allows.
var ErrTooLarge = errors.New("file larger than expected")

// Caps on one-off reads. Pseudo-files report a size of 0 (or a lie) in stat,
// so every read is bounded by what the file can legitimately hold.
const (
	capSmallFile = 4 << 10  // stat, statm, schedstat, io, wchan, syscall, limits
	capStatus    = 16 << 10 // status: ~1.5 KiB, more with long cpu lists on big hosts
	capEnviron   = 1 << 20  // environ: ARG_MAX-bounded, usually a few KiB
	capCmdline   = 1 << 20
)

// readCapped opens path, reads at most limit bytes and closes it. A file that
// fills the cap is truncated: the bytes read are returned with ErrTooLarge
// wrapped, so callers choose whether a prefix is good enough.
func readCapped(path, priv string, limit int) ([]byte, error) {
	fd, err := openRetry(path)
	if err != nil {
		return nil, classify(path, priv, err)
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, min(limit, 4096))
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= limit {
				return buf, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
			}
			nb := make([]byte, len(buf), min(2*cap(buf), limit))
			copy(nb, buf)
			buf = nb
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, classify(path, priv, err)
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}
