package nvml

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// NVML reports PIDs of the host's PID namespace: the driver does not
// translate them (NVIDIA/nvidia-docker#1483). gpufeed's samples are keyed by
// the PIDs its proc root shows. pidMapper reconciles the two through the
// NSpid line of /proc/PID/status, which lists a process's PID in each PID
// namespace from the proc mount's namespace inward.

// statusReadCap bounds a status read: the file is a few KiB.
const statusReadCap = 64 << 10

// pidIndexMaxAge is how long a full scan of the proc root is reused before a
// miss may trigger another.
const pidIndexMaxAge = 5 * time.Second

type pidMapper struct {
	root string

	mu      sync.Mutex
	index   map[int]int // PID in an inner namespace -> PID in the proc root's
	indexAt time.Time
}

func newPIDMapper(root string) *pidMapper { return &pidMapper{root: root} }

// resolve maps an NVML PID to the proc root's view: its PID there, the PID in
// its own namespace when different, or why it is not visible.
func (m *pidMapper) resolve(nvmlPID int) (pid, nsPID int, notVisible string) {
	// The proc root is the host's (or an ancestor namespace's): the PID is
	// there as is.
	if ns, ok := m.nspid(nvmlPID); ok {
		if len(ns) > 1 && ns[0] == nvmlPID {
			return nvmlPID, ns[len(ns)-1], ""
		}
		if len(ns) <= 1 {
			return nvmlPID, 0, ""
		}
	}
	// Otherwise the PID may be an inner-namespace PID of a process listed
	// under another number (a driver that translates PIDs).
	if outer, ok := m.lookupInner(nvmlPID); ok {
		return outer, nvmlPID, ""
	}
	return nvmlPID, 0, "PID " + strconv.Itoa(nvmlPID) + " not found under " + m.root +
		": NVML reports host PIDs; inside a container's PID namespace run gpufeed with the host's /proc (--root DIR with the host's / at DIR) or --pid=host"
}

// nspid reads the NSpid line of root/PID/status.
func (m *pidMapper) nspid(pid int) ([]int, bool) {
	f, err := os.Open(filepath.Join(m.root, strconv.Itoa(pid), "status"))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, statusReadCap))
	if err != nil {
		return nil, false
	}
	return parseNSpid(b)
}

// parseNSpid extracts the PIDs of the "NSpid:" line of a status file, read
// with the sampler's status parser; a malformed or non-positive PID is no
// answer.
func parseNSpid(status []byte) ([]int, bool) {
	st, err := procfs.ParseStatus("status", status)
	if err != nil || len(st.NSpid) == 0 {
		return nil, false
	}
	for _, p := range st.NSpid {
		if p <= 0 {
			return nil, false
		}
	}
	return st.NSpid, true
}

// lookupInner finds the process whose inner-namespace PID is inner, from an
// index of the whole proc root rebuilt at most every pidIndexMaxAge.
func (m *pidMapper) lookupInner(inner int) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.index == nil || time.Since(m.indexAt) > pidIndexMaxAge {
		m.index = map[int]int{}
		m.indexAt = time.Now()
		entries, err := os.ReadDir(m.root)
		if err != nil {
			return 0, false
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			ns, ok := m.nspid(pid)
			if !ok {
				continue // vanished, or not visible
			}
			for _, p := range ns[1:] {
				// Two processes in different containers can share an inner
				// PID: an ambiguous PID maps to nothing.
				if prev, dup := m.index[p]; dup && prev != pid {
					m.index[p] = -1
					continue
				}
				m.index[p] = pid
			}
		}
	}
	outer, ok := m.index[inner]
	return outer, ok && outer > 0
}
