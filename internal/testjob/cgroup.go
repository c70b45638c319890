package testjob

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MemoryCgroup is a cgroup v1 memory cgroup made for one workload.
type MemoryCgroup struct {
	// Dir is its directory under /sys/fs/cgroup/memory.
	Dir string
	// Path is its path as the kernel names it in /proc/PID/cgroup and in
	// OOM reports ("/a/b/gpufeed-testjob-123").
	Path string
}

// MemoryV1Root is where the cgroup v1 memory controller is mounted.
const MemoryV1Root = "/sys/fs/cgroup/memory"

// NewMemoryCgroup makes a memory cgroup with the given limit (swap
// included where the kernel accounts it, so the limit cannot be escaped by
// swapping), as a child of the calling process's own memory cgroup.
func NewMemoryCgroup(name string, limit uint64) (*MemoryCgroup, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: making a memory cgroup needs root", ErrUnavailable)
	}
	if _, err := os.Stat(filepath.Join(MemoryV1Root, "memory.limit_in_bytes")); err != nil {
		return nil, fmt.Errorf("%w: no cgroup v1 memory controller at %s", ErrUnavailable, MemoryV1Root)
	}
	own, err := ownV1Cgroup("memory")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	path := strings.TrimRight(own, "/") + "/" + name
	dir := filepath.Join(MemoryV1Root, path)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	c := &MemoryCgroup{Dir: dir, Path: path}
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatUint(limit, 10)), 0o644); err != nil {
		c.Remove()
		return nil, fmt.Errorf("setting the limit: %w", err)
	}
	// With swap the limit would page out instead of killing; memsw is
	// present only when swap accounting is on.
	_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatUint(limit, 10)), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "memory.swappiness"), []byte("0"), 0o644)
	return c, nil
}

// ProcsFile is the file a process writes its pid to to join the cgroup.
func (c *MemoryCgroup) ProcsFile() string { return filepath.Join(c.Dir, "cgroup.procs") }

// Remove removes the cgroup once its tasks are gone (it waits briefly for
// killed tasks to be reaped).
func (c *MemoryCgroup) Remove() error {
	var err error
	for range 50 {
		if err = syscall.Rmdir(c.Dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("removing %s: %w", c.Dir, err)
}
