// Package fdkinds says what a process's open file descriptors are: files,
// sockets, pipes, anonymous inodes (eventfd, epoll), NVIDIA device nodes,
// other devices, memfds. A leak is easier to fix once its kind is known: a
// thousand sockets and a thousand shard files call for different changes.
package fdkinds

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// Kind names.
const (
	File      = "file"
	Socket    = "socket"
	Pipe      = "pipe"
	AnonInode = "anon_inode"
	Nvidia    = "nvidia" // /dev/nvidia*: a CUDA context's driver handles
	Device    = "device" // other /dev nodes
	Memfd     = "memfd"
	Other     = "other"
)

// Kinds lists the kinds in the order reports present them.
var Kinds = []string{File, Socket, Pipe, AnonInode, Nvidia, Device, Memfd, Other}

// DefaultMax bounds the descriptors read for one process: readlink costs
// about a microsecond each, so 65,536 stay well under 0.1 s.
const DefaultMax = 65536

// Count is what a process holds open.
type Count struct {
	Total  int
	ByKind map[string]int
	// TopDirs are the directories holding the most open regular files,
	// most first (at most three), for "1,012 files under /data/shards".
	TopDirs []DirCount
	// NvidiaNodes lists the distinct /dev/nvidia* nodes held open.
	NvidiaNodes []string
	// Vanished counts descriptors closed between listing and reading;
	// Truncated says more than the maximum were open and the rest were not read.
	Vanished  int
	Truncated bool
}

// DirCount is a directory and how many open files it holds.
type DirCount struct {
	Dir string
	N   int
}

// ErrNotVisible is wrapped when the caller may not read another user's
// descriptors.
var ErrNotVisible = errors.New("not visible")

// ErrGone is wrapped when the process no longer exists.
var ErrGone = errors.New("process gone")

// Read counts pid's open descriptors under procRoot ("/proc").
func Read(procRoot string, pid, max int) (Count, error) {
	if max <= 0 {
		max = DefaultMax
	}
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	f, err := os.Open(dir)
	if err != nil {
		return Count{}, describe(dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(max + 1)
	if err != nil && len(names) == 0 {
		return Count{}, describe(dir, err)
	}
	c := Count{ByKind: map[string]int{}}
	if len(names) > max {
		names = names[:max]
		c.Truncated = true
	}
	dirs := map[string]int{}
	nodes := map[string]bool{}
	for _, n := range names {
		target, err := os.Readlink(filepath.Join(dir, n))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				c.Vanished++
				continue
			}
			return Count{}, describe(dir, err)
		}
		k := Classify(target)
		c.ByKind[k]++
		c.Total++
		switch k {
		case File:
			dirs[path.Dir(target)]++
		case Nvidia:
			nodes[target] = true
		}
	}
	for d, n := range dirs {
		c.TopDirs = append(c.TopDirs, DirCount{Dir: d, N: n})
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

// Classify names the kind of a descriptor from its /proc/PID/fd link target.
func Classify(target string) string {
	switch {
	case strings.HasPrefix(target, "socket:["):
		return Socket
	case strings.HasPrefix(target, "pipe:["):
		return Pipe
	case strings.HasPrefix(target, "anon_inode:"):
		return AnonInode
	case strings.HasPrefix(target, "/memfd:"):
		return Memfd
	case gpu.IsNVIDIANode(target):
		return Nvidia
	case strings.HasPrefix(target, "/dev/"):
		return Device
	case strings.HasPrefix(target, "/"):
		return File
	}
	return Other
}

func describe(dir string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("%s: %w", dir, ErrGone)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: %w: needs CAP_SYS_PTRACE or the process's own user", dir, ErrNotVisible)
	}
	return fmt.Errorf("%s: %w", dir, err)
}
