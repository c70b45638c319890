package gpu

// PCIe per-lane data rates per direction in bytes/s, after line encoding:
// Gen1/2 use 8b/10b, Gen3-5 128b/130b, Gen6 PAM4 FLIT mode (242 of every 256
// bytes carry data). Index = generation.
var pcieLaneBytesPerSec = [...]float64{
	1: 2.5e9 * 8 / 10 / 8,
	2: 5e9 * 8 / 10 / 8,
	3: 8e9 * 128 / 130 / 8,
	4: 16e9 * 128 / 130 / 8,
	5: 32e9 * 128 / 130 / 8,
	6: 64e9 / 8 * 242 / 256,
}

// PCIeLinkBytesPerSec returns a PCIe link's raw data rate in one direction in
// bytes/s (Gen4 x16: 31.5e9), the ceiling against which PCIe TX/RX throughput
// is judged. ok is false for a generation or width PCIe does not define.
func PCIeLinkBytesPerSec(gen, width int) (bytesPerSec float64, ok bool) {
	if gen < 1 || gen >= len(pcieLaneBytesPerSec) {
		return 0, false
	}
	switch width {
	case 1, 2, 4, 8, 12, 16, 32:
	default:
		return 0, false
	}
	return pcieLaneBytesPerSec[gen] * float64(width), true
}
