package procfs

import (
	"errors"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
)

// Interrupts is /proc/interrupts: one count per online CPU for every line.
type Interrupts struct {
	// CPUs are the CPU numbers of the columns, from the header ("CPU0 CPU3").
	CPUs []int `json:"cpus"`
	// Lines are the rows in file order.
	Lines []IRQLine `json:"lines"`
}

// IRQLine is one row of /proc/interrupts.
type IRQLine struct {
	// Name is the row label without its colon: "36", "LOC", "NMI".
	Name string `json:"name"`
	// Device is true for a numbered IRQ line (a device interrupt); false for
	// the architecture's per-CPU rows (LOC, RES, CAL, TLB...).
	Device bool `json:"device"`
	// Counts holds one count per column of CPUs (fewer when the row is short).
	Counts []uint64 `json:"counts"`
	// Desc is the rest of the row: controller, hwirq, and the device names.
	Desc string `json:"desc,omitempty"`
}

// Interrupts reads proc/interrupts.
func (f FS) Interrupts() (Interrupts, error) {
	p := f.ProcPath("interrupts")
	data, err := readHost(p, DefaultMaxRead)
	if err != nil && !errors.Is(err, ErrTooLarge) {
		return Interrupts{}, err
	}
	irq, perr := ParseInterrupts(p, data)
	if perr != nil {
		return irq, perr
	}
	// A table cut at the cap (err wraps ErrTooLarge): what was read counts.
	return irq, err
}

// ParseInterrupts parses /proc/interrupts. The first line names the CPU
// columns; a row holds a label, up to one count per column, then a
// description. Rows with fewer counts (ERR, MIS) keep what they have. A row
// that does not start with a label is an error naming its line.
func ParseInterrupts(path string, data []byte) (Interrupts, error) {
	var irq Interrupts
	lines := strings.Split(string(data), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		return irq, parseErr(path, 1, "empty", "a header of CPU columns")
	}
	for _, col := range strings.Fields(lines[0]) {
		num, ok := strings.CutPrefix(col, "CPU")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 0 || n >= cpuset.MaxID {
			return irq, parseErr(path, 1, "header column "+strconv.Quote(col), "CPUn")
		}
		irq.CPUs = append(irq.CPUs, n)
	}
	for i, line := range lines[1:] {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		label, ok := strings.CutSuffix(fields[0], ":")
		if !ok || label == "" {
			return irq, parseErr(path, i+2, strconv.Quote(fields[0]), "a row label ending in ':'")
		}
		row := IRQLine{Name: label}
		_, err := strconv.Atoi(label)
		row.Device = err == nil
		j := 1
		for ; j < len(fields) && len(row.Counts) < len(irq.CPUs); j++ {
			v, err := strconv.ParseUint(fields[j], 10, 64)
			if err != nil {
				break
			}
			row.Counts = append(row.Counts, v)
		}
		row.Desc = strings.Join(fields[j:], " ")
		irq.Lines = append(irq.Lines, row)
	}
	return irq, nil
}

// DevicePerCPU sums the device (numbered) interrupt lines per CPU, keyed by
// CPU number.
func (irq Interrupts) DevicePerCPU() map[int]uint64 {
	out := make(map[int]uint64, len(irq.CPUs))
	for _, cpu := range irq.CPUs {
		out[cpu] = 0
	}
	for _, l := range irq.Lines {
		if !l.Device {
			continue
		}
		for i, c := range l.Counts {
			out[irq.CPUs[i]] += c
		}
	}
	return out
}
