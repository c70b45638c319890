package procfs

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// What a process's open file descriptors are (PROC/PID/fd): files, sockets,
// pipes, anonymous inodes (eventfd, epoll), NVIDIA device nodes, other
// devices, memfds. A leak is easier to fix once its kind is known: a
// thousand sockets and a thousand shard files call for different changes.

// Descriptor kinds.
const (
	FDFile      = "file"
	FDSocket    = "socket"
	FDPipe      = "pipe"
	FDAnonInode = "anon_inode"
	FDNvidia    = "nvidia" // /dev/nvidia*: a CUDA context's driver handles
	FDDevice    = "device" // other /dev nodes
	FDMemfd     = "memfd"
	FDOther     = "other"
)

// FDKindNames lists the kinds in the order reports present them.
var FDKindNames = []string{FDFile, FDSocket, FDPipe, FDAnonInode, FDNvidia, FDDevice, FDMemfd, FDOther}

// MaxFDs bounds the descriptors read for one process: readlink costs about
// a microsecond each, so 65,536 stay well under 0.1 s.
const MaxFDs = 65536

// FDKinds is what a process holds open.
type FDKinds struct {
	Total  int
	ByKind map[string]int
	// TopDirs are the directories holding the most open regular files,
	// most first (at most three), for "1,012 files under /data/shards".
	TopDirs []FDDirCount
	// NvidiaNodes lists the distinct /dev/nvidia* nodes held open.
	NvidiaNodes []string
	// Vanished counts descriptors closed between listing and reading;
	// Truncated says more than the maximum were open and the rest were not read.
	Vanished  int
	Truncated bool
}

// FDDirCount is a directory and how many open files it holds.
type FDDirCount struct {
	Dir string
	N   int
}

// NVIDIAMinors are the N of every /dev/nvidiaN held open: the GPUs the
// process uses (control nodes are not GPUs), ascending.
func (k FDKinds) NVIDIAMinors() []int {
	var out []int
	for _, n := range k.NvidiaNodes {
		if m, ok := gpu.NVIDIAMinor(n); ok && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// FDKinds reads PROC/PID/fd (pid 0: self) and what each descriptor points
// to (it needs ptrace-read access to the process). At most max descriptors
// are read (0: MaxFDs; negative: all).
func (fs FS) FDKinds(pid, max int) (FDKinds, error) {
	if max == 0 {
		max = MaxFDs
	}
	dir := fs.PidPath(pid, "fd")
	f, err := os.Open(dir)
	if err != nil {
		return FDKinds{}, classify(dir, PrivPtraceRead, ErrVanished, err)
	}
	defer f.Close()
	n := -1
	if max > 0 {
		n = max + 1
	}
	names, err := f.Readdirnames(n)
	if err != nil && len(names) == 0 {
		return FDKinds{}, classify(dir, PrivPtraceRead, ErrVanished, err)
	}
	c := FDKinds{ByKind: map[string]int{}}
	if max > 0 && len(names) > max {
		names = names[:max]
		c.Truncated = true
	}
	dirs := map[string]int{}
	nodes := map[string]bool{}
	for _, n := range names {
		target, err := os.Readlink(filepath.Join(dir, n))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				c.Vanished++
				continue
			}
			return FDKinds{}, classify(dir, PrivPtraceRead, ErrVanished, err)
		}
		k := ClassifyFD(target)
		c.ByKind[k]++
		c.Total++
		switch k {
		case FDFile:
			dirs[path.Dir(target)]++
		case FDNvidia:
			nodes[target] = true
		}
	}
	for d, n := range dirs {
		c.TopDirs = append(c.TopDirs, FDDirCount{Dir: d, N: n})
	}
	sort.Slice(c.TopDirs, func(i, j int) bool {
		if c.TopDirs[i].N != c.TopDirs[j].N {
			return c.TopDirs[i].N > c.TopDirs[j].N
		}
		return c.TopDirs[i].Dir < c.TopDirs[j].Dir
	})
	if len(c.TopDirs) > 3 {
		c.TopDirs = c.TopDirs[:3]
	}
	for n := range nodes {
		c.NvidiaNodes = append(c.NvidiaNodes, n)
	}
	sort.Strings(c.NvidiaNodes)
	return c, nil
}

// ClassifyFD names the kind of a descriptor from its PROC/PID/fd link target.
func ClassifyFD(target string) string {
	switch {
	case strings.HasPrefix(target, "socket:["):
		return FDSocket
	case strings.HasPrefix(target, "pipe:["):
		return FDPipe
	case strings.HasPrefix(target, "anon_inode:"):
		return FDAnonInode
	case strings.HasPrefix(target, "/memfd:"):
		return FDMemfd
	case gpu.IsNVIDIANode(target):
		return FDNvidia
	case strings.HasPrefix(target, "/dev/"):
		return FDDevice
	case strings.HasPrefix(target, "/"):
		return FDFile
	}
	return FDOther
}
