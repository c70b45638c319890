package procfs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	val, ok := Field([]byte(s), "Device Minor")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(val)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
