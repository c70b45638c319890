package gpu

import (
	"strconv"
	"strings"
)

// NVIDIANodePrefix begins the path of every NVIDIA device node: the GPUs
// (/dev/nvidia0, /dev/nvidia1 ...) and the driver's control and memory
// nodes (/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-modeset).
const NVIDIANodePrefix = "/dev/nvidia"

// IsNVIDIANode reports whether a path (an fd's link target, a mapped file)
// is an NVIDIA device node: a process holding one talks to the driver.
func IsNVIDIANode(path string) bool { return strings.HasPrefix(path, NVIDIANodePrefix) }

// NVIDIAMinor reads N from "/dev/nvidiaN", the node of the GPU whose device
// minor number is N; control nodes (/dev/nvidiactl, /dev/nvidia-uvm) are not
// GPUs.
func NVIDIAMinor(path string) (int, bool) {
	num, ok := strings.CutPrefix(path, NVIDIANodePrefix)
	if !ok || num == "" {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
