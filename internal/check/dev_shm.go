package check

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

const (
	// shmFailAtOrBelow: Docker's default /dev/shm is 64 MiB; DataLoader
	// workers pass every batch through it and die with "Bus error ...
	// insufficient shared memory (shm)".
	shmFailAtOrBelow = 64 << 20
	// shmWarnBelow: NVIDIA's container guides start PyTorch with
	// --shm-size=1g or --ipc=host.
	shmWarnBelow = 1 << 30
	// shmUsedWarnFraction: a /dev/shm 90% full fails the next batch.
	shmUsedWarnFraction = 0.9
)

var devShmCheck = Check{
	ID:    "dev-shm",
	Title: "/dev/shm size and use (DataLoader workers pass tensors through it)",
	// Sources: 000 §5
	run: runDevShm,
}

func runDevShm(e *env) []Outcome {
	subj := "/dev/shm of " + e.subjectPID()
	mountSrc := procFile(pidDir(e.opts.PID), "mountinfo")
	mounts, err := e.targetMounts()
	if err != nil {
		return []Outcome{readFailure(subj, "mount table", mountSrc, err, "a running process: check the PID", "read access to "+mountSrc)}
	}
	var m procfs.Mount
	found := false
	for _, mm := range mounts {
		if mm.MountPoint == "/dev/shm" {
			m, found = mm, true
		}
	}
	if !found {
		return []Outcome{{Status: Warn, Subject: subj, Evidence: []finding.Evidence{text("/dev/shm mount", "none", mountSrc)},
			Claim:    "no filesystem mounted at /dev/shm: shared-memory tensors land on whatever /dev is, or fail",
			Decision: "Mount a tmpfs at /dev/shm (docker --shm-size=8g or --ipc=host; Kubernetes: an emptyDir with medium Memory)."}}
	}
	ev := []finding.Evidence{text("/dev/shm filesystem", m.FSType+" "+optionString(m.Options), mountSrc)}
	var size, used uint64
	haveSize, haveUse := false, false
	if s, ok := m.Options["size"]; ok {
		if b, ok := tmpfsSize(s, e); ok {
			size, haveSize = b, true
			ev = append(ev, bytesEv("size (mount option)", b, mountSrc))
		}
	}
	statPath := e.fs.ProcPath(pidDir(e.opts.PID), "root", "dev", "shm")
	statSrc := "statfs " + procFile(pidDir(e.opts.PID), "root/dev/shm")
	st, serr := e.opts.Statfs(statPath)
	switch {
	case serr == nil && st.Type == procfs.TmpfsMagic:
		size, used, haveSize, haveUse = st.TotalBytes, st.UsedBytes(), true, true
		ev = append(ev, bytesEv("size", st.TotalBytes, statSrc), bytesEv("used", st.UsedBytes(), statSrc))
	case serr == nil:
		ev = append(ev, text("use", "not read: the path is not a tmpfs here (a copied /proc tree)", statSrc))
	case procfs.IsDenied(serr):
		ev = append(ev, text("use", "not visible: "+needPtrace, statSrc))
	default:
		ev = append(ev, text("use", "not read: "+errnoText(serr), statSrc))
	}
	if !haveSize {
		if m.FSType == "tmpfs" {
			// tmpfs without size= defaults to half of RAM.
			if mi, err := e.memInfo(); err == nil && mi.MemTotal != nil {
				size, haveSize = *mi.MemTotal/2, true
				ev = append(ev, bytesEv("size (tmpfs default: half of RAM)", size, procFile("meminfo")))
			}
		}
		if !haveSize {
			return []Outcome{{Status: Absent, Subject: subj, Evidence: ev, Claim: "cannot tell the size of /dev/shm",
				Need: "a size= mount option or statfs access (" + needPtrace + ")"}}
		}
	}
	decision := "Give the container a larger /dev/shm (docker --shm-size=8g or --ipc=host; Kubernetes: emptyDir medium: Memory " +
		"with a sizeLimit), or lower num_workers/prefetch_factor."
	switch {
	case size <= shmFailAtOrBelow:
		return []Outcome{{Status: Fail, Subject: subj, Evidence: ev, Decision: decision, Supports: finding.Preprocessing,
			Claim: fmt.Sprintf("/dev/shm is %s: DataLoader workers die with \"Bus error: insufficient shared memory\"", human(size))}}
	case haveUse && size > 0 && float64(used) >= shmUsedWarnFraction*float64(size):
		return []Outcome{{Status: Warn, Subject: subj, Evidence: ev, Decision: decision, Supports: finding.Preprocessing,
			Claim: fmt.Sprintf("/dev/shm %.0f%% full (%s of %s)", 100*float64(used)/float64(size), human(used), human(size))}}
	case size < shmWarnBelow:
		return []Outcome{{Status: Warn, Subject: subj, Evidence: ev, Decision: decision, Supports: finding.Preprocessing,
			Claim: fmt.Sprintf("/dev/shm is %s: small for several DataLoader workers", human(size))}}
	}
	claim := fmt.Sprintf("/dev/shm is %s", human(size))
	if haveUse {
		claim += fmt.Sprintf(", %s used", human(used))
	}
	return []Outcome{{Status: OK, Subject: subj, Evidence: ev, Claim: claim}}
}

// tmpfsSize reads a tmpfs size= option: bytes, with a k/m/g/t suffix, or a
// percentage of RAM.
func tmpfsSize(s string, e *env) (uint64, bool) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return 0, false
	}
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseUint(pct, 10, 64)
		mi, merr := e.memInfo()
		if err != nil || merr != nil || mi.MemTotal == nil {
			return 0, false
		}
		return *mi.MemTotal / 100 * p, true
	}
	mult := uint64(1)
	switch s[len(s)-1] {
	case 'k':
		mult = 1 << 10
	case 'm':
		mult = 1 << 20
	case 'g':
		mult = 1 << 30
	case 't':
		mult = 1 << 40
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > (1<<63)/mult {
		return 0, false
	}
	return v * mult, true
}

// errnoText is the cause of a path error without the path, which under
// --root holds the caller's own directory.
func errnoText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func optionString(opts map[string]string) string {
	if v, ok := opts["size"]; ok {
		return "size=" + v
	}
	return "(no size= option)"
}
