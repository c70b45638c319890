package procfs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
)

// PCI class codes (the top 16 bits of the 24-bit class file) and vendors the
// checks look for.
const (
	PCIVendorNVIDIA   = 0x10de
	PCIClassDisplay   = 0x03   // base class: VGA 0x0300 and 3D controller 0x0302
	PCIClassNVMe      = 0x0108 // mass storage, non-volatile memory controller
	PCIClassNetwork   = 0x02   // base class: Ethernet 0x0200, InfiniBand 0x0207
	PCIClassPCIBridge = 0x0604
)

// PCIDevice holds the sysfs facts of one PCI function. Optional files are
// pointers: nil means the kernel did not provide the file (or wrote
// "Unknown"), never zero.
type PCIDevice struct {
	// Address is the sysfs name, "0000:81:00.0".
	Address string `json:"address"`
	// Upstream lists the PCI bridges between the root complex and this
	// device, nearest the root first, from the sysfs device path.
	Upstream []string `json:"upstream,omitempty"`
	// Class is the 24-bit class code (0x030200 for a 3D controller).
	Class  uint32 `json:"class"`
	Vendor uint32 `json:"vendor"`
	Device uint32 `json:"device"`
	Driver string `json:"driver,omitempty"`

	// Link speeds in GT/s per lane and widths in lanes.
	CurrentLinkSpeed *float64 `json:"current_link_speed_gts,omitempty"`
	MaxLinkSpeed     *float64 `json:"max_link_speed_gts,omitempty"`
	CurrentLinkWidth *int     `json:"current_link_width,omitempty"`
	MaxLinkWidth     *int     `json:"max_link_width,omitempty"`

	// NUMANode is -1 when the firmware does not say.
	NUMANode     *int        `json:"numa_node,omitempty"`
	LocalCPUList *cpuset.Set `json:"local_cpulist,omitempty"`

	// Problems lists optional files that exist but could not be read or parsed.
	Problems []error `json:"-"`
}

// BaseClass is the top byte of the class code.
func (d PCIDevice) BaseClass() uint32 { return d.Class >> 16 }

// SubClass is the top 16 bits of the class code (base and sub class).
func (d PCIDevice) SubClass() uint32 { return d.Class >> 8 }

// IsNVIDIAGPU reports a display-class function from NVIDIA.
func (d PCIDevice) IsNVIDIAGPU() bool {
	return d.Vendor == PCIVendorNVIDIA && d.BaseClass() == PCIClassDisplay
}

// IsNVMe reports an NVMe controller.
func (d PCIDevice) IsNVMe() bool { return d.SubClass() == PCIClassNVMe }

// IsNetwork reports a network controller (Ethernet, InfiniBand...).
func (d PCIDevice) IsNetwork() bool { return d.BaseClass() == PCIClassNetwork }

// IsBridge reports a PCI-to-PCI bridge (root port, switch port).
func (d PCIDevice) IsBridge() bool { return d.SubClass() == PCIClassPCIBridge }

var pciAddrRE = regexp.MustCompile(`^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// PCIDevices reads every function under sys/bus/pci/devices. A device whose
// mandatory files cannot be read is skipped and reported in skipped, so one
// odd device never sinks the listing; err is for the directory itself.
func (f FS) PCIDevices() (devs []PCIDevice, skipped []error, err error) {
	dir := f.SysPath("bus/pci/devices")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := strings.ToLower(e.Name())
		if !pciAddrRE.MatchString(name) {
			continue
		}
		d, err := f.readPCIDevice(filepath.Join(dir, e.Name()), name)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		devs = append(devs, d)
	}
	slices.SortFunc(devs, func(a, b PCIDevice) int { return strings.Compare(a.Address, b.Address) })
	return devs, skipped, nil
}

// PCIDevice reads one function by its sysfs address ("0000:81:00.0").
func (f FS) PCIDevice(addr string) (PCIDevice, error) {
	addr = strings.ToLower(addr)
	if !pciAddrRE.MatchString(addr) {
		return PCIDevice{}, fmt.Errorf("PCI address %q: want the sysfs form 0000:81:00.0", addr)
	}
	return f.readPCIDevice(f.SysPath("bus/pci/devices", addr), addr)
}

func (f FS) readPCIDevice(path, addr string) (PCIDevice, error) {
	d := PCIDevice{Address: addr}
	if target, err := os.Readlink(path); err == nil {
		d.Upstream = UpstreamFromSysfsPath(target, addr)
	}
	for _, m := range []struct {
		file string
		dst  *uint32
	}{{"class", &d.Class}, {"vendor", &d.Vendor}, {"device", &d.Device}} {
		s, err := readString(filepath.Join(path, m.file))
		if err != nil {
			return d, err
		}
		v, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			return d, parseErr(filepath.Join(path, m.file), 1, strconv.Quote(s), "a hexadecimal number like 0x10de")
		}
		*m.dst = uint32(v)
	}
	if target, err := os.Readlink(filepath.Join(path, "driver")); err == nil {
		d.Driver = filepath.Base(target)
	}
	optional := func(file string, parse func(string) error) {
		s, err := readString(filepath.Join(path, file))
		if err != nil {
			if !IsAbsent(err) {
				d.Problems = append(d.Problems, err)
			}
			return
		}
		if err := parse(s); err != nil {
			d.Problems = append(d.Problems, parseErr(filepath.Join(path, file), 1, err.Error(), ""))
		}
	}
	optional("current_link_speed", func(s string) (err error) { d.CurrentLinkSpeed, err = ParseLinkSpeed(s); return })
	optional("max_link_speed", func(s string) (err error) { d.MaxLinkSpeed, err = ParseLinkSpeed(s); return })
	optional("current_link_width", func(s string) (err error) { d.CurrentLinkWidth, err = parseLinkWidth(s); return })
	optional("max_link_width", func(s string) (err error) { d.MaxLinkWidth, err = parseLinkWidth(s); return })
	optional("numa_node", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q: want an integer node number", s)
		}
		d.NUMANode = &n
		return nil
	})
	optional("local_cpulist", func(s string) error {
		set, err := cpuset.Parse(s)
		if err != nil {
			return err
		}
		d.LocalCPUList = &set
		return nil
	})
	return d, nil
}

// UpstreamFromSysfsPath extracts the bridges above addr from a sysfs device
// path such as "../../../devices/pci0000:80/0000:80:01.0/0000:81:00.0".
func UpstreamFromSysfsPath(target, addr string) []string {
	var up []string
	for _, part := range strings.Split(filepath.ToSlash(target), "/") {
		part = strings.ToLower(part)
		if part == addr {
			break
		}
		if pciAddrRE.MatchString(part) {
			up = append(up, part)
		}
	}
	return up
}

// ParseLinkSpeed reads a sysfs link speed: "16.0 GT/s PCIe" (current
// kernels) or "8 GT/s" (older ones, without the suffix). "Unknown" (a link that is down, or a speed the
// kernel does not name) yields nil.
func ParseLinkSpeed(s string) (*float64, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasPrefix(s, "Unknown") {
		return nil, nil
	}
	num, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "GT/s") {
		return nil, fmt.Errorf("%q: want a speed like \"16.0 GT/s PCIe\"", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v > 0 && v <= 1e4) { // also rejects NaN
		return nil, fmt.Errorf("%q: want a positive GT/s number", s)
	}
	return &v, nil
}

func parseLinkWidth(s string) (*int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "x"))
	if err != nil || n < 0 || n > 1024 {
		return nil, fmt.Errorf("%q: want a lane count", s)
	}
	return &n, nil
}

// PCIeGen names the PCIe generation of a per-lane rate in GT/s (8.0 -> 3);
// 0 when the rate is not a standard one.
func PCIeGen(gts float64) int {
	for gen, rate := range []float64{2.5, 5, 8, 16, 32, 64, 128} {
		if gts > rate*0.99 && gts < rate*1.01 {
			return gen + 1
		}
	}
	return 0
}

// PCIeRate is the per-lane rate in GT/s of a generation (3 -> 8.0); 0 when unknown.
func PCIeRate(gen int) float64 {
	rates := []float64{2.5, 5, 8, 16, 32, 64, 128}
	if gen < 1 || gen > len(rates) {
		return 0
	}
	return rates[gen-1]
}
