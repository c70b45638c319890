package sys

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// Status holds the /proc/PID/status fields check needs.
type Status struct {
	Name        string      `json:"name"`
	Tgid        int         `json:"tgid"`
	Threads     *int        `json:"threads,omitempty"`
	CPUsAllowed *cpuset.Set `json:"cpus_allowed,omitempty"`
	MemsAllowed *cpuset.Set `json:"mems_allowed,omitempty"`
	// VmLckKB and VmPinKB are locked and pinned memory in KiB.
	VmLckKB *uint64 `json:"vm_lck_kb,omitempty"`
	VmPinKB *uint64 `json:"vm_pin_kb,omitempty"`
}

// ProcStatus reads proc/PID/status (pid 0: self).
func (f FS) ProcStatus(pid int) (Status, error) {
	return f.statusAt(f.ProcPath(PIDDir(pid), "status"))
}

// ThreadStatus reads proc/PID/task/TID/status.
func (f FS) ThreadStatus(pid, tid int) (Status, error) {
	return f.statusAt(f.ProcPath(PIDDir(pid), "task", strconv.Itoa(tid), "status"))
}

func (f FS) statusAt(p string) (Status, error) {
	data, _, err := ReadCapped(p, 256<<10)
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(p, data)
}

// ParseStatus parses "Key:\tvalue" lines; unknown keys are ignored, a known
// key with a malformed value is an error naming its line.
func ParseStatus(path string, data []byte) (Status, error) {
	var s Status
	for i, line := range strings.Split(string(data), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		bad := func(want string) error { return parseErr(path, i+1, "%s %q: want %s", key, val, want) }
		switch key {
		case "Name":
			s.Name = val
		case "Tgid":
			n, err := strconv.Atoi(val)
			if err != nil {
				return s, bad("a process id")
			}
			s.Tgid = n
		case "Threads":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return s, bad("a thread count")
			}
			s.Threads = &n
		case "Cpus_allowed_list", "Mems_allowed_list":
			set, err := cpuset.Parse(val)
			if err != nil {
				return s, bad("a list like 0-7,16")
			}
			if key == "Cpus_allowed_list" {
				s.CPUsAllowed = &set
			} else {
				s.MemsAllowed = &set
			}
		case "VmLck", "VmPin":
			num, unit, _ := strings.Cut(val, " ")
			v, err := strconv.ParseUint(num, 10, 64)
			if err != nil || (unit != "" && unit != "kB") {
				return s, bad("a size in kB")
			}
			if key == "VmLck" {
				s.VmLckKB = &v
			} else {
				s.VmPinKB = &v
			}
		}
	}
	return s, nil
}

// LastCPU reads field 39 ("processor": the CPU the task last ran on) of
// proc/PID/task/TID/stat.
func (f FS) LastCPU(pid, tid int) (int, error) {
	p := f.ProcPath(PIDDir(pid), "task", strconv.Itoa(tid), "stat")
	data, _, err := ReadCapped(p, 64<<10)
	if err != nil {
		return 0, err
	}
	return ParseStatProcessor(p, data)
}

// ParseStatProcessor extracts the processor field of a stat line with the
// sampler's stat parser (procfs.ParseStat, which finds the command name's
// closing ')' even when the name holds spaces and parentheses).
func ParseStatProcessor(path string, data []byte) (int, error) {
	var st procfs.Stat
	if err := procfs.ParseStat(data, &st); err != nil {
		var pe *procfs.ParseError
		if errors.As(err, &pe) {
			return 0, parseErr(path, 1, "byte %d: want %s", pe.Offset, pe.Want)
		}
		return 0, parseErr(path, 1, "%v", err)
	}
	if st.Processor < 0 || st.Processor >= cpuset.MaxID {
		return 0, parseErr(path, 1, "processor %d: want a CPU number", st.Processor)
	}
	return st.Processor, nil
}
