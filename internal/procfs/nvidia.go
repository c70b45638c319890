package procfs

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// NVIDIADriverGPUs maps device minor numbers (the N of /dev/nvidiaN) to PCI
// addresses, from proc/driver/nvidia/gpus/<address>/information. The
// directory exists only where the NVIDIA kernel driver is loaded.
func (f FS) NVIDIADriverGPUs() (map[int]string, error) {
	dir := f.ProcPath("driver/nvidia/gpus")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name(), "information")
		data, _, err := readPrefix(p, PrivRoot, ErrAbsent, capText)
		if err != nil {
			continue
		}
		if minor, ok := ParseNVIDIAInformationMinor(string(data)); ok {
			out[minor] = strings.ToLower(e.Name())
		}
	}
	return out, nil
}

// ParseNVIDIAInformationMinor finds "Device Minor: N" in the driver's
// information file.
func ParseNVIDIAInformationMinor(s string) (int, bool) {
	for line := range strings.SplitSeq(s, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "Device Minor" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// FDs summarises a process's open file descriptors.
type FDs struct {
	Count int `json:"count"`
	// NVIDIAMinors are the N of every /dev/nvidiaN the process holds open:
	// the GPUs it uses.
	NVIDIAMinors []int `json:"nvidia_minors,omitempty"`
	// Vanished counts descriptors closed between listing and reading.
	Vanished int `json:"vanished,omitempty"`
}

// FDs lists proc/PID/fd and reads each link (needs ptrace-read access to
// the process).
func (f FS) FDs(pid int) (FDs, error) {
	dir := f.ProcPath(PIDDir(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return FDs{}, err
	}
	var out FDs
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			if IsAbsent(err) {
				out.Vanished++
				continue
			}
			return FDs{}, err
		}
		out.Count++
		if minor, ok := gpu.NVIDIAMinor(target); ok && !slices.Contains(out.NVIDIAMinors, minor) {
			out.NVIDIAMinors = append(out.NVIDIAMinors, minor)
		}
	}
	slices.Sort(out.NVIDIAMinors)
	return out, nil
}
