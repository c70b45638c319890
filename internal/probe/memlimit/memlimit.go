// Package memlimit reads the memory limit a process lives under: its
// memory cgroup's limit and usage (cgroup v1 or v2, the tightest limit on
// the path from the root), so a growth rate can be turned into a time until
// the kernel's OOM killer acts.
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// unlimited: cgroup v1 reports "no limit" as PAGE_COUNTER_MAX pages
// (9223372036854771712 on 4 KiB pages); anything this large is no limit.
const unlimited = 1 << 62

// Limit is a process's memory cgroup and its limit.
type Limit struct {
	Version int    // 1 or 2
	Path    string // the process's cgroup, as /proc/PID/cgroup names it
	// LimitBytes is the tightest limit on the path from the root; nil when
	// none is set. LimitAt is the cgroup that sets it.
	LimitBytes *uint64
	LimitAt    string
	// UsageBytes is the usage of the cgroup that sets the limit (of the
	// process's own cgroup when none does); nil when not readable.
	UsageBytes *uint64
}

// ErrNoCgroup is wrapped when the process has no memory cgroup to read.
var ErrNoCgroup = errors.New("no memory cgroup")

// ForPID reads pid's memory cgroup under procRoot ("/proc") and sysRoot ("/sys").
func ForPID(procRoot, sysRoot string, pid int) (Limit, error) {
	p := filepath.Join(procRoot, strconv.Itoa(pid), "cgroup")
	f, err := os.Open(p)
	if err != nil {
		return Limit{}, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	v1, v2, err := parseCgroupFile(io.LimitReader(f, 64<<10))
	if err != nil {
		return Limit{}, fmt.Errorf("%s: %w", p, err)
	}
	fsRoot := filepath.Join(sysRoot, "fs", "cgroup")
	if v1 != "" {
		return walk(1, filepath.Join(fsRoot, "memory"), v1, "memory.limit_in_bytes", "memory.usage_in_bytes")
	}
	if v2 != "" {
		if _, err := os.Stat(filepath.Join(fsRoot, "cgroup.controllers")); err == nil {
			return walk(2, fsRoot, v2, "memory.max", "memory.current")
		}
		if _, err := os.Stat(filepath.Join(fsRoot, "unified", "cgroup.controllers")); err == nil {
			return walk(2, filepath.Join(fsRoot, "unified"), v2, "memory.max", "memory.current")
		}
	}
	return Limit{}, fmt.Errorf("%s: %w", p, ErrNoCgroup)
}

// parseCgroupFile reads /proc/PID/cgroup: "ID:controllers:path" lines; the
// v1 memory controller's path and the v2 ("0::") path.
func parseCgroupFile(r io.Reader) (v1, v2 string, err error) {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			return "", "", fmt.Errorf("line %d: expected ID:CONTROLLERS:PATH, got %q", n, sc.Text())
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1 = parts[2]
			}
		}
	}
	return v1, v2, sc.Err()
}

// walk reads the limit of the cgroup and of every ancestor, keeping the
// tightest.
func walk(version int, root, cg, limitFile, usageFile string) (Limit, error) {
	l := Limit{Version: version, Path: cg}
	clean := filepath.Clean("/" + cg)
	own := filepath.Join(root, clean)
	if _, err := os.Stat(own); err != nil {
		// Inside a cgroup namespace the path may not exist from here:
		// the namespace's root is what is mounted.
		clean = "/"
	}
	usageAt := clean
	for dir := clean; ; dir = filepath.Dir(dir) {
		if v, ok, err := readValue(filepath.Join(root, dir, limitFile)); err == nil && ok && v < unlimited {
			if l.LimitBytes == nil || v < *l.LimitBytes {
				vv := v
				l.LimitBytes, l.LimitAt = &vv, dir
				usageAt = dir
			}
		}
		if dir == "/" {
			break
		}
	}
	if v, ok, err := readValue(filepath.Join(root, usageAt, usageFile)); err == nil && ok {
		l.UsageBytes = &v
	}
	return l, nil
}

// readValue reads a one-number cgroup file; "max" reads as no limit.
func readValue(p string) (uint64, bool, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, false, nil
		}
		return 0, false, err
	}
	defer f.Close()
	// A cgroup file's size says nothing of its content: read at most 64 bytes.
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s: expected a number or \"max\", got %q", p, s)
	}
	return v, true, nil
}
