//go:build !linux

package procfs

import "errors"

// ListUnixSockets is only implemented on Linux (sock_diag).
func ListUnixSockets() (map[uint64]UnixSocket, error) {
	return nil, errors.New("Unix socket peers are only visible on Linux (sock_diag)")
}
