package procfs

import (
	"strconv"

	"github.com/gpufeed/gpufeed/internal/cpuset"
)

// Status holds the /proc/PID/status (or task/TID/status) fields gpufeed
// uses: the sampler's slow tier reads it for every thread that ran, the
// platform checks for the target and its main thread. Optional fields say
// whether the kernel wrote them: absent is not zero.
type Status struct {
	Name string
	Tgid int
	// Threads is the thread count (HaveThreads: the line was there).
	Threads     int
	HaveThreads bool
	// Context switches since the task started.
	VoluntaryCtxt, NonvoluntaryCtxt uint64
	HaveCtxt                        bool
	// CPUsAllowedList and MemsAllowedList are the lists as written
	// ("0-15"), checked when read; CPUsAllowed and MemsAllowed parse them.
	CPUsAllowedList string
	MemsAllowedList string
	haveCPUs        bool
	haveMems        bool
	// VmLckKB and VmPinKB are locked and pinned memory in KiB.
	VmLckKB, VmPinKB     uint64
	HaveVmLck, HaveVmPin bool
	// NSpid lists the pid in each nested pid namespace, outermost first.
	NSpid []int
}

// CPUsAllowed is Cpus_allowed_list as a set; ok is false when the line is absent.
func (s Status) CPUsAllowed() (set cpuset.Set, ok bool) {
	return listOf(s.CPUsAllowedList, s.haveCPUs)
}

// MemsAllowed is Mems_allowed_list as a set; ok is false when the line is absent.
func (s Status) MemsAllowed() (set cpuset.Set, ok bool) {
	return listOf(s.MemsAllowedList, s.haveMems)
}

func listOf(list string, have bool) (cpuset.Set, bool) {
	if !have {
		return nil, false
	}
	set, err := cpuset.Parse(list)
	return set, err == nil // checked by ParseStatus
}

// ReadStatus reads and parses PATH (a status file).
func ReadStatus(path string) (Status, error) {
	b, err := readFileRaw(path, PrivProcMount, ErrVanished, capStatus)
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(path, b)
}

// ProcStatus reads PROC/PID/status (pid 0: self).
func (fs FS) ProcStatus(pid int) (Status, error) { return ReadStatus(fs.PidPath(pid, "status")) }

// ThreadStatus reads PROC/PID/task/TID/status.
func (fs FS) ThreadStatus(pid, tid int) (Status, error) {
	return ReadStatus(fs.TaskPath(pid, tid, "status"))
}

// ParseStatus parses "Key:\tvalue" lines; unknown keys are ignored. A value
// gpufeed uses that is present but malformed is an error naming the line.
func ParseStatus(file string, b []byte) (Status, error) {
	var s Status
	lineNo := 0
	for i := 0; i < len(b); {
		var line []byte
		line, i = nextLine(b, i)
		lineNo++
		key, at, ok := cutKey(line)
		if !ok {
			continue
		}
		val, next := nextField(line, at)
		bad := func(want string) error {
			return &ParseError{File: file, Line: lineNo, Offset: -1, Got: string(key) + " " + strconv.Quote(string(val)), Want: want}
		}
		switch string(key) {
		case "Name":
			// The name may hold spaces: the rest of the line.
			s.Name = string(trimSpace(line[at:]))
		case "Tgid":
			v, ok := parseUint(val)
			if !ok {
				return s, bad("a process id")
			}
			s.Tgid = int(v)
		case "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches":
			v, ok := parseUint(val)
			if !ok {
				return s, bad("an unsigned integer")
			}
			if key[0] == 'v' {
				s.VoluntaryCtxt = v
			} else {
				s.NonvoluntaryCtxt = v
			}
			s.HaveCtxt = true
		case "Threads":
			v, ok := parseUint(val)
			if !ok {
				return s, bad("a thread count")
			}
			s.Threads, s.HaveThreads = int(v), true
		case "Cpus_allowed_list", "Mems_allowed_list":
			if !cpuset.Valid(val) {
				return s, bad("a list like 0-7,16")
			}
			if key[0] == 'C' {
				s.CPUsAllowedList, s.haveCPUs = string(val), true
			} else {
				s.MemsAllowedList, s.haveMems = string(val), true
			}
		case "VmLck", "VmPin":
			v, ok := parseUint(val)
			unit, _ := nextField(line, next)
			if !ok || (len(unit) > 0 && string(unit) != "kB") {
				return s, bad("a size in kB")
			}
			if key[2] == 'L' {
				s.VmLckKB, s.HaveVmLck = v, true
			} else {
				s.VmPinKB, s.HaveVmPin = v, true
			}
		case "NSpid":
			s.NSpid = s.NSpid[:0]
			for k := at; k < len(line); {
				var f []byte
				f, k = nextField(line, k)
				if len(f) == 0 {
					break
				}
				v, ok := parseUint(f)
				if !ok {
					return s, bad("a list of pids")
				}
				s.NSpid = append(s.NSpid, int(v))
			}
		}
	}
	return s, nil
}

// trimSpace drops leading and trailing spaces and tabs.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
