package procfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The memory limit a process lives under (PROC/PID/cgroup and SYS/fs/cgroup):
// its memory cgroup's limit and usage (cgroup v1 or v2, the tightest limit on
// the path from the root), so a growth rate can be turned into a time until
// the kernel's OOM killer acts.

// memcgNoLimit: cgroup v1 reports "no limit" as PAGE_COUNTER_MAX pages
// (9223372036854771712 on 4 KiB pages); anything this large is no limit.
const memcgNoLimit = 1 << 62

// MemCgroup is a process's memory cgroup and its limit.
type MemCgroup struct {
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

// ErrNoMemCgroup is wrapped when the process has no memory cgroup to read.
var ErrNoMemCgroup = errors.New("no memory cgroup")

// MemCgroup reads pid's memory cgroup: PROC/PID/cgroup names it, SYS/fs/cgroup
// holds its limit and usage.
func (fs FS) MemCgroup(pid int) (MemCgroup, error) {
	p := fs.PidPath(pid, "cgroup")
	b, err := readCapped(p, PrivProcMount, capText)
	if err != nil {
		return MemCgroup{}, err
	}
	v1, v2, err := parseCgroupFile(p, b)
	if err != nil {
		return MemCgroup{}, err
	}
	fsRoot := fs.SysPath("fs", "cgroup")
	if v1 != "" {
		return walkMemCgroup(1, filepath.Join(fsRoot, "memory"), v1, "memory.limit_in_bytes", "memory.usage_in_bytes")
	}
	if v2 != "" {
		if _, err := os.Stat(filepath.Join(fsRoot, "cgroup.controllers")); err == nil {
			return walkMemCgroup(2, fsRoot, v2, "memory.max", "memory.current")
		}
		if _, err := os.Stat(filepath.Join(fsRoot, "unified", "cgroup.controllers")); err == nil {
			return walkMemCgroup(2, filepath.Join(fsRoot, "unified"), v2, "memory.max", "memory.current")
		}
	}
	return MemCgroup{}, fmt.Errorf("%s: %w", p, ErrNoMemCgroup)
}

// parseCgroupFile reads /proc/PID/cgroup: "ID:controllers:path" lines; the
// v1 memory controller's path and the v2 ("0::") path.
func parseCgroupFile(file string, b []byte) (v1, v2 string, err error) {
	for n, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" && n == 0 {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return "", "", parseErr(file, n+1, strconv.Quote(line), "ID:CONTROLLERS:PATH")
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
	return v1, v2, nil
}

// walkMemCgroup reads the limit of the cgroup and of every ancestor,
// keeping the tightest.
func walkMemCgroup(version int, root, cg, limitFile, usageFile string) (MemCgroup, error) {
	l := MemCgroup{Version: version, Path: cg}
	clean := filepath.Clean("/" + cg)
	own := filepath.Join(root, clean)
	if _, err := os.Stat(own); err != nil {
		// Inside a cgroup namespace the path may not exist from here:
		// the namespace's root is what is mounted.
		clean = "/"
	}
	usageAt := clean
	for dir := clean; ; dir = filepath.Dir(dir) {
		if v, ok, err := readCgroupValue(filepath.Join(root, dir, limitFile)); err == nil && ok && v < memcgNoLimit {
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
	if v, ok, err := readCgroupValue(filepath.Join(root, usageAt, usageFile)); err == nil && ok {
		l.UsageBytes = &v
	}
	return l, nil
}

// readCgroupValue reads a one-number cgroup file; "max" reads as no limit,
// an absent file as nothing.
func readCgroupValue(p string) (uint64, bool, error) {
	// A cgroup file's size says nothing of its content: read at most 64 bytes.
	b, err := readFileRaw(p, PrivRoot, ErrAbsent, 64)
	if errors.Is(err, ErrTooLarge) {
		err = nil
	}
	if err != nil {
		if IsAbsent(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, parseErr(p, 1, strconv.Quote(s), `a number or "max"`)
	}
	return v, true, nil
}

// CgroupPaths reads PROC/PID/cgroup and returns every hierarchy's path (the
// v2 "0::" path and each v1 controller's), without duplicates, in the
// file's order: where a job scheduler placed the process (a Slurm job's
// step, a Kubernetes pod's container).
func (fs FS) CgroupPaths(pid int) ([]string, error) {
	p := fs.PidPath(pid, "cgroup")
	b, err := readCapped(p, PrivProcMount, capText)
	if err != nil {
		return nil, err
	}
	return ParseCgroupPaths(p, b)
}

// ParseCgroupPaths parses the "ID:CONTROLLERS:PATH" lines of a
// /proc/PID/cgroup file named file.
func ParseCgroupPaths(file string, b []byte) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for n, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" && n == 0 {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, parseErr(file, n+1, strconv.Quote(line), "ID:CONTROLLERS:PATH")
		}
		if !seen[parts[2]] {
			seen[parts[2]] = true
			out = append(out, parts[2])
		}
	}
	return out, nil
}
