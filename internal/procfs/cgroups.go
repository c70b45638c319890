package procfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// A process's cgroups and what they limit (cgroup v1, v2 and hybrid).
//
// /proc/PID/cgroup names the process's cgroup in every hierarchy: one
// "ID:CONTROLLERS:PATH" line per v1 hierarchy, "0::PATH" for the v2 unified
// one. The mount table (/proc/self/mountinfo: this process's view, the one
// whose paths it can open) says where each hierarchy is mounted: fstype
// "cgroup" with the controllers among the super options for v1, "cgroup2"
// for v2. A controller is read from its v1 hierarchy when one is mounted,
// else from the v2 tree when the controller is enabled there (hybrid: the
// v1 cpu and memory controllers beside a v2 tree holding none). Sources:
// the kernel's Documentation/admin-guide/cgroup-v2.rst and
// Documentation/admin-guide/cgroup-v1/{cgroups,memory}.rst,
// Documentation/scheduler/sched-bwc.rst (CFS bandwidth control).
//
// A file that is absent or denied is "not visible" with its reason (in
// Cgroup.NotVisible), never a zero.

// CgroupController is where one controller's files of the process's cgroup
// lie.
type CgroupController struct {
	Version int // 1 or 2
	// Path is the cgroup as the kernel names it in /proc/PID/cgroup.
	Path string
	// Mount is the directory the hierarchy is mounted on, as this process
	// opens it (under the --root); Dir the process's cgroup under it.
	Mount string
	Dir   string
}

// Cgroup is a process's cgroups: where each controller's files lie.
type Cgroup struct {
	// Mode is "v1", "v2" or "hybrid" (v1 controllers and a v2 tree mounted).
	Mode string
	// CPU, CPUSet, Memory and Pids are nil when the controller is not
	// mounted or not enabled for the process's cgroup.
	CPU, CPUSet, Memory, Pids *CgroupController
	// NotVisible maps a controller to why it is not read.
	NotVisible map[string]string
}

// ErrNoCgroupMount is wrapped when no cgroup hierarchy is mounted where
// this process can see it.
var ErrNoCgroupMount = errors.New("no cgroup hierarchy mounted")

// cgroupMount is one cgroup line of a mountinfo file.
type cgroupMount struct {
	Root, Point string
	V2          bool
	Controllers []string // v1 only
}

// ParseCgroupMounts reads the cgroup and cgroup2 mounts of a mountinfo file
// (proc(5): "ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] - FSTYPE SOURCE
// SUPEROPTS").
func ParseCgroupMounts(file string, b []byte) ([]cgroupMount, error) {
	var out []cgroupMount
	for n, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 6 || sep < 0 || sep+3 > len(f) {
			return nil, parseErr(file, n+1, strconv.Quote(line), "ID PARENT MAJ:MIN ROOT POINT OPTIONS ... - FSTYPE SOURCE SUPEROPTIONS")
		}
		fstype := f[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		m := cgroupMount{Root: UnescapeMountField(f[3]), Point: UnescapeMountField(f[4]), V2: fstype == "cgroup2"}
		if !m.V2 && sep+3 < len(f) {
			for _, o := range strings.Split(f[sep+3], ",") {
				switch o {
				case "rw", "ro", "":
				default:
					if !strings.Contains(o, "=") {
						m.Controllers = append(m.Controllers, o)
					}
				}
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// cgroupLine is one line of /proc/PID/cgroup.
type cgroupLine struct {
	Controllers []string
	Path        string
	V2          bool
}

func parseCgroupLines(file string, b []byte) ([]cgroupLine, error) {
	var out []cgroupLine
	for n, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" && n == 0 {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[0] == "" {
			return nil, parseErr(file, n+1, strconv.Quote(line), "ID:CONTROLLERS:PATH")
		}
		l := cgroupLine{Path: parts[2], V2: parts[0] == "0" && parts[1] == ""}
		if !l.V2 {
			l.Controllers = strings.Split(parts[1], ",")
		}
		out = append(out, l)
	}
	return out, nil
}

// hostDir turns a mount point of the mount table into a path this process
// opens: under --root, /sys/... lies under the sys root and anything else
// beside the proc root.
func (fs FS) hostDir(point string) string {
	point = path.Clean("/" + point)
	if rest, ok := strings.CutPrefix(point, "/sys/"); ok {
		return fs.SysPath(rest)
	}
	if point == "/sys" {
		return fs.Sys
	}
	return filepath.Join(filepath.Dir(filepath.Clean(fs.Proc)), point)
}

// Cgroups finds pid's cgroups from PROC/PID/cgroup and this process's mount
// table (PROC/self/mountinfo).
func (fs FS) Cgroups(pid int) (Cgroup, error) {
	p := fs.PidPath(pid, "cgroup")
	b, err := readCapped(p, PrivProcMount, capText)
	if err != nil {
		return Cgroup{}, err
	}
	lines, err := parseCgroupLines(p, b)
	if err != nil {
		return Cgroup{}, err
	}
	mp := fs.ProcPath("self", "mountinfo")
	mb, err := readFile(mp, PrivProcMount, ErrAbsent, DefaultMaxRead)
	if err != nil {
		return Cgroup{}, err
	}
	mounts, err := ParseCgroupMounts(mp, mb)
	if err != nil {
		return Cgroup{}, err
	}
	return fs.resolveCgroups(lines, mounts)
}

func (fs FS) resolveCgroups(lines []cgroupLine, mounts []cgroupMount) (Cgroup, error) {
	if len(mounts) == 0 {
		return Cgroup{}, ErrNoCgroupMount
	}
	cg := Cgroup{NotVisible: map[string]string{}}
	var hasV1, hasV2 bool
	for _, m := range mounts {
		if m.V2 {
			hasV2 = true
		} else {
			hasV1 = true
		}
	}
	switch {
	case hasV1 && hasV2:
		cg.Mode = "hybrid"
	case hasV2:
		cg.Mode = "v2"
	default:
		cg.Mode = "v1"
	}
	// dirFor places a cgroup path under a mount: the mount's root is the
	// part of the path the mount leaves out (a container without a cgroup
	// namespace sees its own cgroup mounted at /sys/fs/cgroup).
	dirFor := func(m cgroupMount, cgPath string, version int) *CgroupController {
		clean := path.Clean("/" + cgPath)
		rel := clean
		if m.Root != "/" && m.Root != "" {
			r, ok := strings.CutPrefix(clean, path.Clean(m.Root))
			if !ok || (r != "" && r[0] != '/') {
				return nil
			}
			rel = "/" + strings.TrimPrefix(r, "/")
		}
		mount := fs.hostDir(m.Point)
		return &CgroupController{Version: version, Path: clean, Mount: mount, Dir: filepath.Join(mount, rel)}
	}
	v1 := func(ctrl string, names ...string) *CgroupController {
		for _, l := range lines {
			if l.V2 {
				continue
			}
			for _, c := range l.Controllers {
				for _, n := range names {
					if c != n {
						continue
					}
					for _, m := range mounts {
						if !m.V2 && contains(m.Controllers, n) {
							if d := dirFor(m, l.Path, 1); d != nil {
								return d
							}
							cg.NotVisible[ctrl] = "the cgroup " + l.Path + " lies outside the " + m.Point + " mount (another cgroup namespace)"
							return nil
						}
					}
				}
			}
		}
		return nil
	}
	var v2 *CgroupController
	for _, l := range lines {
		if !l.V2 {
			continue
		}
		for _, m := range mounts {
			if m.V2 {
				v2 = dirFor(m, l.Path, 2)
				break
			}
		}
	}
	// A v2 controller shows in the parent's cgroup.subtree_control; the
	// cgroup's own cgroup.controllers lists what it may use.
	var v2ctrls map[string]bool
	if v2 != nil {
		if b, err := readHost(filepath.Join(v2.Dir, "cgroup.controllers"), capText); err == nil {
			v2ctrls = map[string]bool{}
			for _, c := range strings.Fields(string(b)) {
				v2ctrls[c] = true
			}
		} else if _, serr := os.Stat(v2.Dir); serr != nil {
			v2 = nil
		}
	}
	pick := func(ctrl string, v1names ...string) *CgroupController {
		if c := v1(ctrl, v1names...); c != nil {
			if _, err := os.Stat(c.Dir); err != nil {
				cg.NotVisible[ctrl] = "the cgroup directory " + c.Dir + " is not there from here (another cgroup namespace, or it was removed)"
				return nil
			}
			return c
		}
		if _, seen := cg.NotVisible[ctrl]; seen {
			return nil
		}
		if v2 != nil && v2ctrls[ctrl] {
			c := *v2
			return &c
		}
		cg.NotVisible[ctrl] = "no " + ctrl + " controller mounted (v1) or enabled for this cgroup (v2 cgroup.controllers)"
		return nil
	}
	cg.CPU = pick("cpu", "cpu")
	cg.CPUSet = pick("cpuset", "cpuset")
	cg.Memory = pick("memory", "memory")
	cg.Pids = pick("pids", "pids")
	if len(cg.NotVisible) == 0 {
		cg.NotVisible = nil
	}
	return cg, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ancestors lists c's directory and each parent's up to its mount, own first.
func (c *CgroupController) ancestors() []string {
	var out []string
	mount := filepath.Clean(c.Mount)
	for d := filepath.Clean(c.Dir); ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == mount || len(d) <= len(mount) || d == filepath.Dir(d) {
			break
		}
	}
	return out
}

// CgroupLimits are what limits a process's cgroups: the tightest limit on
// the path from the hierarchy's root, and the cgroup that sets it.
type CgroupLimits struct {
	// CPUQuotaUs/CPUPeriodUs: CFS bandwidth (v2 cpu.max "QUOTA PERIOD";
	// v1 cpu.cfs_quota_us, cpu.cfs_period_us); zero quota: no limit.
	CPUQuotaUs  int64
	CPUPeriodUs int64
	// CPULimitAt is the cgroup directory setting the quota (its cpu.stat
	// counts the throttling).
	CPULimitAt string
	// CPUWeight is v2 cpu.weight (1-10000, 100 default); CPUShares v1
	// cpu.shares (1024 default); nil when not read.
	CPUWeight *uint64
	CPUShares *uint64
	// CPUSet is the effective cpuset (v2 cpuset.cpus.effective, v1
	// cpuset.effective_cpus or cpuset.cpus), "" when not read.
	CPUSet string
	// MemMax is the tightest memory.max / memory.limit_in_bytes; nil: none.
	MemMax     *uint64
	MemLimitAt string
	// MemHigh is the tightest v2 memory.high; nil: none.
	MemHigh *uint64
	// PidsMax is the tightest pids.max; nil: none.
	PidsMax    *uint64
	PidsDir    string
	MemoryDir  string // the cgroup whose usage counts against MemMax
	NotVisible map[string]string
}

// CPULimit is the quota in CPUs (0.6 for 60000/100000); 0 when none.
func (l CgroupLimits) CPULimit() float64 {
	if l.CPUQuotaUs <= 0 || l.CPUPeriodUs <= 0 {
		return 0
	}
	return float64(l.CPUQuotaUs) / float64(l.CPUPeriodUs)
}

func (l *CgroupLimits) notVisible(field string, err error) {
	if err == nil || IsAbsent(err) {
		return
	}
	if l.NotVisible == nil {
		l.NotVisible = map[string]string{}
	}
	if d := AsDenied(err); d != nil {
		l.NotVisible[field] = d.NotVisible()
		return
	}
	l.NotVisible[field] = "not readable: " + err.Error()
}

// readCgroupFile reads a small cgroup file (its size says nothing of its
// content).
func readCgroupFile(p string) ([]byte, error) {
	b, err := readFileRaw(p, PrivRoot, ErrAbsent, capText)
	if errors.Is(err, ErrTooLarge) {
		err = nil
	}
	return b, err
}

// ParseCgroupNumber reads a one-number cgroup file: ok is false for "max"
// (no limit) and for v1's PAGE_COUNTER_MAX-sized "no limit"; v1's
// cpu.cfs_quota_us is -1 for no limit.
func ParseCgroupNumber(file string, b []byte) (v uint64, ok bool, err error) {
	s := strings.TrimSpace(string(b))
	if s == "max" || s == "-1" {
		return 0, false, nil
	}
	v, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, parseErr(file, 1, strconv.Quote(s), `a number or "max"`)
	}
	if v >= memcgNoLimit {
		return 0, false, nil
	}
	return v, true, nil
}

// ParseCPUMax reads v2 cpu.max: "$MAX $PERIOD", MAX "max" for no limit.
func ParseCPUMax(file string, b []byte) (quota, period int64, err error) {
	f := strings.Fields(string(b))
	if len(f) < 1 || len(f) > 2 {
		return 0, 0, parseErr(file, 1, strconv.Quote(string(b)), `"$MAX $PERIOD" (MAX a number or "max")`)
	}
	period = 100000
	if len(f) == 2 {
		if period, err = strconv.ParseInt(f[1], 10, 64); err != nil || period <= 0 {
			return 0, 0, parseErr(file, 1, strconv.Quote(f[1]), "a positive period in microseconds")
		}
	}
	if f[0] == "max" {
		return 0, period, nil
	}
	if quota, err = strconv.ParseInt(f[0], 10, 64); err != nil || quota <= 0 {
		return 0, 0, parseErr(file, 1, strconv.Quote(f[0]), `a positive quota in microseconds or "max"`)
	}
	return quota, period, nil
}

// ParseFlatKeyed reads a flat-keyed cgroup file ("KEY VALUE" lines:
// cpu.stat, memory.stat, memory.events, v1 memory.oom_control).
func ParseFlatKeyed(file string, b []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	for n, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, parseErr(file, n+1, strconv.Quote(line), "KEY VALUE")
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, parseErr(file, n+1, strconv.Quote(line), "KEY VALUE with VALUE a number")
		}
		out[f[0]] = v
	}
	return out, nil
}

// CgroupLimits reads the limits of c's cgroups, walking each controller's
// path up to its hierarchy's root.
func (c Cgroup) Limits() CgroupLimits {
	var l CgroupLimits
	for k, v := range c.NotVisible {
		if l.NotVisible == nil {
			l.NotVisible = map[string]string{}
		}
		l.NotVisible[k] = "not visible: " + v
	}
	if cc := c.CPU; cc != nil {
		best := 0.0
		for _, d := range cc.ancestors() {
			var q, per int64
			var err error
			if cc.Version == 2 {
				var b []byte
				if b, err = readCgroupFile(filepath.Join(d, "cpu.max")); err == nil {
					q, per, err = ParseCPUMax(filepath.Join(d, "cpu.max"), b)
				}
			} else {
				var b []byte
				if b, err = readCgroupFile(filepath.Join(d, "cpu.cfs_quota_us")); err == nil {
					var v uint64
					var ok bool
					if v, ok, err = ParseCgroupNumber(filepath.Join(d, "cpu.cfs_quota_us"), b); err == nil && ok {
						q = int64(v)
						if b, err = readCgroupFile(filepath.Join(d, "cpu.cfs_period_us")); err == nil {
							if v, ok, err = ParseCgroupNumber(filepath.Join(d, "cpu.cfs_period_us"), b); err == nil && ok {
								per = int64(v)
							}
						}
					}
				}
			}
			if err != nil {
				l.notVisible("cpu_quota", err)
				continue
			}
			if q > 0 && per > 0 {
				if lim := float64(q) / float64(per); best == 0 || lim < best {
					best, l.CPUQuotaUs, l.CPUPeriodUs, l.CPULimitAt = lim, q, per, d
				}
			}
		}
		name, dst := "cpu.weight", &l.CPUWeight
		if cc.Version == 1 {
			name, dst = "cpu.shares", &l.CPUShares
		}
		if b, err := readCgroupFile(filepath.Join(cc.Dir, name)); err == nil {
			if v, ok, err := ParseCgroupNumber(filepath.Join(cc.Dir, name), b); err == nil && ok {
				*dst = &v
			}
		} else {
			l.notVisible(name, err)
		}
	}
	if cc := c.CPUSet; cc != nil {
		names := []string{"cpuset.cpus.effective"}
		if cc.Version == 1 {
			names = []string{"cpuset.effective_cpus", "cpuset.cpus"}
		}
		for _, n := range names {
			b, err := readCgroupFile(filepath.Join(cc.Dir, n))
			if err == nil {
				l.CPUSet = strings.TrimSpace(string(b))
				break
			}
			l.notVisible(n, err)
		}
	}
	if cc := c.Memory; cc != nil {
		l.MemoryDir = cc.Dir
		maxName := "memory.max"
		if cc.Version == 1 {
			maxName = "memory.limit_in_bytes"
		}
		for _, d := range cc.ancestors() {
			if b, err := readCgroupFile(filepath.Join(d, maxName)); err == nil {
				if v, ok, err := ParseCgroupNumber(filepath.Join(d, maxName), b); err == nil && ok && (l.MemMax == nil || v < *l.MemMax) {
					l.MemMax, l.MemLimitAt, l.MemoryDir = &v, d, d
				}
			} else {
				l.notVisible(maxName, err)
			}
			if cc.Version == 2 {
				if b, err := readCgroupFile(filepath.Join(d, "memory.high")); err == nil {
					if v, ok, err := ParseCgroupNumber(filepath.Join(d, "memory.high"), b); err == nil && ok && (l.MemHigh == nil || v < *l.MemHigh) {
						l.MemHigh = &v
					}
				}
			}
		}
	}
	if cc := c.Pids; cc != nil {
		l.PidsDir = cc.Dir
		for _, d := range cc.ancestors() {
			if b, err := readCgroupFile(filepath.Join(d, "pids.max")); err == nil {
				if v, ok, err := ParseCgroupNumber(filepath.Join(d, "pids.max"), b); err == nil && ok && (l.PidsMax == nil || v < *l.PidsMax) {
					l.PidsMax, l.PidsDir = &v, d
				}
			} else {
				l.notVisible("pids.max", err)
			}
		}
	}
	return l
}

// CgroupCounters are the cgroup counters sampled over the window: the CPU
// throttling of the cgroup setting the quota, the memory of the cgroup
// setting the memory limit (the process's own when none does).
type CgroupCounters struct {
	// CPU bandwidth (cpu.stat): periods elapsed with the cgroup runnable,
	// periods in which it was throttled, nanoseconds throttled (v2
	// throttled_usec*1000, v1 throttled_time). HaveCPU: read.
	HaveCPU     bool
	NrPeriods   uint64
	NrThrottled uint64
	ThrottledNs uint64
	// Memory: usage (memory.current, memory.usage_in_bytes), anonymous
	// and file-backed (page cache) bytes of memory.stat (v2 anon/file; v1
	// total_rss/total_cache, else rss/cache). HaveMem: usage read.
	HaveMem   bool
	MemUsage  uint64
	HaveStat  bool
	Anon      uint64
	File      uint64
	HaveEvent bool
	// memory.events (v2: high, max, oom, oom_kill); v1: Max is failcnt,
	// OOMKill oom_control's oom_kill, UnderOOM its under_oom.
	High, Max, OOM, OOMKill uint64
	UnderOOM                bool
	HavePids                bool
	PidsCurrent             uint64
	NotVisible              map[string]string
}

func (k *CgroupCounters) notVisible(field string, err error) {
	if err == nil {
		return
	}
	if k.NotVisible == nil {
		k.NotVisible = map[string]string{}
	}
	if d := AsDenied(err); d != nil {
		k.NotVisible[field] = d.NotVisible()
	} else if IsAbsent(err) {
		k.NotVisible[field] = "not visible: absent (this kernel or cgroup has no such file)"
	} else {
		k.NotVisible[field] = "not readable: " + err.Error()
	}
}

// Counters reads c's counters; l (from Limits) says which cgroup sets each
// limit.
func (c Cgroup) Counters(l CgroupLimits) CgroupCounters {
	var k CgroupCounters
	if cc := c.CPU; cc != nil {
		dir := cc.Dir
		if l.CPULimitAt != "" {
			dir = l.CPULimitAt
		}
		p := filepath.Join(dir, "cpu.stat")
		b, err := readCgroupFile(p)
		var m map[string]uint64
		if err == nil {
			m, err = ParseFlatKeyed(p, b)
		}
		if err == nil {
			_, hasPeriods := m["nr_periods"]
			k.HaveCPU = hasPeriods
			k.NrPeriods, k.NrThrottled = m["nr_periods"], m["nr_throttled"]
			if v, ok := m["throttled_usec"]; ok {
				k.ThrottledNs = v * 1000
			} else {
				k.ThrottledNs = m["throttled_time"]
			}
		} else {
			k.notVisible("cpu.stat", err)
		}
	}
	if cc := c.Memory; cc != nil {
		dir := l.MemoryDir
		if dir == "" {
			dir = cc.Dir
		}
		usage, stat, anon, file := "memory.current", "memory.stat", "anon", "file"
		if cc.Version == 1 {
			usage, anon, file = "memory.usage_in_bytes", "total_rss", "total_cache"
		}
		p := filepath.Join(dir, usage)
		if b, err := readCgroupFile(p); err == nil {
			if v, ok, err := ParseCgroupNumber(p, b); err == nil && ok {
				k.HaveMem, k.MemUsage = true, v
			} else {
				k.notVisible(usage, err)
			}
		} else {
			k.notVisible(usage, err)
		}
		p = filepath.Join(dir, stat)
		b, err := readFile(p, PrivRoot, ErrAbsent, DefaultMaxRead)
		var m map[string]uint64
		if err == nil {
			m, err = ParseFlatKeyed(p, b)
		}
		if err == nil {
			a, okA := m[anon]
			f, okF := m[file]
			if cc.Version == 1 && !okA {
				a, okA = m["rss"]
				f, okF = m["cache"]
			}
			k.HaveStat, k.Anon, k.File = okA && okF, a, f
		} else {
			k.notVisible(stat, err)
		}
		if cc.Version == 2 {
			p := filepath.Join(dir, "memory.events")
			b, err := readCgroupFile(p)
			var m map[string]uint64
			if err == nil {
				m, err = ParseFlatKeyed(p, b)
			}
			if err == nil {
				k.HaveEvent = true
				k.High, k.Max, k.OOM, k.OOMKill = m["high"], m["max"], m["oom"], m["oom_kill"]
			} else {
				k.notVisible("memory.events", err)
			}
		} else {
			p := filepath.Join(dir, "memory.oom_control")
			b, err := readCgroupFile(p)
			var m map[string]uint64
			if err == nil {
				m, err = ParseFlatKeyed(p, b)
			}
			if err == nil {
				k.HaveEvent = true
				k.OOMKill, k.UnderOOM = m["oom_kill"], m["under_oom"] != 0
				if _, ok := m["oom_kill"]; !ok {
					k.notVisible("memory.oom_control oom_kill", fmt.Errorf("%s: %w: no oom_kill line (a kernel older than 4.13)", p, ErrAbsent))
				}
			} else {
				k.notVisible("memory.oom_control", err)
			}
			p = filepath.Join(dir, "memory.failcnt")
			if b, err := readCgroupFile(p); err == nil {
				if v, ok, err := ParseCgroupNumber(p, b); err == nil && ok {
					k.Max = v
				}
			} else {
				k.notVisible("memory.failcnt", err)
			}
		}
	}
	if cc := c.Pids; cc != nil {
		dir := l.PidsDir
		if dir == "" {
			dir = cc.Dir
		}
		p := filepath.Join(dir, "pids.current")
		if b, err := readCgroupFile(p); err == nil {
			if v, ok, err := ParseCgroupNumber(p, b); err == nil && ok {
				k.HavePids, k.PidsCurrent = true, v
			}
		} else {
			k.notVisible("pids.current", err)
		}
	}
	return k
}

// SortedNotVisible lists a not-visible map as "field: reason" lines.
func SortedNotVisible(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+": "+v)
	}
	sort.Strings(out)
	return out
}
