package procfs

import (
	"fmt"
	"strconv"
	"strings"
)

// KernelVersion is the release the running kernel reports.
type KernelVersion struct {
	Release string `json:"release"`
	Major   int    `json:"major"`
	Minor   int    `json:"minor"`
}

// AtLeast reports whether the version is major.minor or later.
func (k KernelVersion) AtLeast(major, minor int) bool {
	return k.Major > major || (k.Major == major && k.Minor >= minor)
}

// KernelRelease reads proc/sys/kernel/osrelease (the uname -r of the machine
// whose /proc this is, which matters under --root).
func (f FS) KernelRelease() (KernelVersion, error) {
	p := f.ProcPath("sys/kernel/osrelease")
	s, err := readString(p)
	if err != nil {
		return KernelVersion{}, err
	}
	k, err := ParseKernelRelease(s)
	if err != nil {
		return k, parseErr(p, 1, err.Error(), "a release like 6.8.0-45-generic")
	}
	return k, nil
}

// ParseKernelRelease reads "6.8.0-45-generic" as 6.8.
func ParseKernelRelease(s string) (KernelVersion, error) {
	k := KernelVersion{Release: strings.TrimSpace(s)}
	parts := strings.SplitN(k.Release, ".", 3)
	if len(parts) < 2 {
		return k, fmt.Errorf("%q: want a release like 6.8.0-45-generic", s)
	}
	var err error
	if k.Major, err = strconv.Atoi(parts[0]); err != nil {
		return k, fmt.Errorf("%q: major version is not a number", s)
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	if k.Minor, err = strconv.Atoi(minor); err != nil {
		return k, fmt.Errorf("%q: minor version is not a number", s)
	}
	return k, nil
}

// SchedExt is the sched_ext state: "enabled" with the BPF scheduler's name,
// or "disabled". Absent on kernels before 6.12 or built without it.
type SchedExt struct {
	State string `json:"state"`
	Ops   string `json:"ops,omitempty"`
}

// SchedExt reads sys/kernel/sched_ext/{state,root/ops}.
func (f FS) SchedExt() (SchedExt, error) {
	state, err := readString(f.SysPath("kernel/sched_ext/state"))
	if err != nil {
		return SchedExt{}, err
	}
	s := SchedExt{State: state}
	if ops, err := readString(f.SysPath("kernel/sched_ext/root/ops")); err == nil {
		s.Ops = ops
	}
	return s, nil
}

// Uptime reads proc/uptime in seconds.
func (f FS) Uptime() (float64, error) {
	p := f.ProcPath("uptime")
	s, err := readString(p)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(first, 64)
	if err != nil || v < 0 {
		return 0, parseErr(p, 1, strconv.Quote(s), "seconds since boot")
	}
	return v, nil
}

// ParseLoadavgLastPID returns the last field of proc/loadavg ("0.34 2.23
// 2.76 3/1082 23556"): the pid most recently handed out in the reader's pid
// namespace (and so whenever a process or thread is created in it or in
// one below it). It does not move while nothing is created.
func ParseLoadavgLastPID(b []byte) (int, error) {
	end := len(b)
	for end > 0 && (b[end-1] == '\n' || b[end-1] == ' ') {
		end--
	}
	start := end
	for start > 0 && b[start-1] != ' ' {
		start--
	}
	if start == 0 || start == end || end-start > 10 {
		return 0, &ParseError{File: "loadavg", Offset: start, Want: "the last pid as the line's fifth field"}
	}
	n := 0
	for _, c := range b[start:end] {
		if c < '0' || c > '9' {
			return 0, &ParseError{File: "loadavg", Offset: start, Want: "the last pid as an unsigned integer"}
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}
