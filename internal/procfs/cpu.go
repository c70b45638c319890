package procfs

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
)

// CPU holds the sysfs facts of one logical CPU. Nil pointers and empty
// strings mean the file is absent (a VM without cpufreq, x86 without
// cpu_capacity), never zero.
type CPU struct {
	ID int `json:"id"`
	// Online is nil where the file is absent (cpu0 often has none: always online).
	Online *bool `json:"online,omitempty"`

	// cpufreq policy, from cpuN/cpufreq/.
	Governor      string  `json:"governor,omitempty"`
	Driver        string  `json:"driver,omitempty"`
	EPP           string  `json:"energy_performance_preference,omitempty"`
	CurKHz        *uint64 `json:"scaling_cur_freq_khz,omitempty"`
	MaxKHz        *uint64 `json:"cpuinfo_max_freq_khz,omitempty"`
	ScalingMaxKHz *uint64 `json:"scaling_max_freq_khz,omitempty"`

	// Capacity is cpu_capacity (1024 = the biggest core) on heterogeneous
	// (big.LITTLE, P/E) and some other systems.
	Capacity *uint64 `json:"cpu_capacity,omitempty"`

	// Topology.
	PackageID      *int        `json:"physical_package_id,omitempty"`
	CoreID         *int        `json:"core_id,omitempty"`
	ThreadSiblings *cpuset.Set `json:"thread_siblings,omitempty"`

	// Problems lists files that exist but could not be read or parsed.
	Problems []error `json:"-"`
}

// HasCPUFreq reports whether the CPU has a cpufreq policy directory.
func (c CPU) HasCPUFreq() bool { return c.Governor != "" || c.CurKHz != nil || c.MaxKHz != nil }

// CPUs reads every cpuN directory under sys/devices/system/cpu, by CPU number.
func (f FS) CPUs() ([]CPU, error) {
	dir := f.SysPath("devices/system/cpu")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var cpus []CPU
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "cpu")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(num)
		if err != nil || id < 0 || id >= cpuset.MaxID {
			continue
		}
		cpus = append(cpus, readCPU(filepath.Join(dir, e.Name()), id))
	}
	slices.SortFunc(cpus, func(a, b CPU) int { return a.ID - b.ID })
	return cpus, nil
}

func readCPU(dir string, id int) CPU {
	c := CPU{ID: id}
	str := func(rel string, dst *string) {
		s, err := readString(filepath.Join(dir, rel))
		if err == nil {
			*dst = s
		} else if !IsAbsent(err) {
			c.Problems = append(c.Problems, err)
		}
	}
	num := func(rel string) *uint64 {
		p := filepath.Join(dir, rel)
		s, err := readString(p)
		if err != nil {
			if !IsAbsent(err) {
				c.Problems = append(c.Problems, err)
			}
			return nil
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			// cpufreq writes "<unknown>" when it cannot sample; that is absent, not a fault.
			if s != "<unknown>" {
				c.Problems = append(c.Problems, parseErr(p, 1, strconv.Quote(s), "an unsigned integer"))
			}
			return nil
		}
		return &v
	}
	integer := func(rel string) *int {
		v := num(rel)
		if v == nil || *v > 1<<31 {
			return nil
		}
		n := int(*v)
		return &n
	}
	if v := num("online"); v != nil {
		on := *v == 1
		c.Online = &on
	}
	str("cpufreq/scaling_governor", &c.Governor)
	str("cpufreq/scaling_driver", &c.Driver)
	str("cpufreq/energy_performance_preference", &c.EPP)
	c.CurKHz = num("cpufreq/scaling_cur_freq")
	c.MaxKHz = num("cpufreq/cpuinfo_max_freq")
	c.ScalingMaxKHz = num("cpufreq/scaling_max_freq")
	c.Capacity = num("cpu_capacity")
	c.PackageID = integer("topology/physical_package_id")
	c.CoreID = integer("topology/core_id")
	var sib string
	str("topology/thread_siblings_list", &sib)
	if sib != "" {
		set, err := cpuset.Parse(sib)
		if err != nil {
			c.Problems = append(c.Problems, parseErr(filepath.Join(dir, "topology/thread_siblings_list"), 1, err.Error(), "a CPU list like 0-7,16"))
		} else {
			c.ThreadSiblings = &set
		}
	}
	return c
}

// CPUListFile reads a file holding a CPU list (isolated, nohz_full, online,
// a node's cpulist). An empty file is the empty set.
func CPUListFile(path string) (cpuset.Set, error) {
	s, err := readString(path)
	if err != nil {
		return nil, err
	}
	if s == "(null)" {
		// Some kernels print an empty nohz_full mask this way.
		return cpuset.Set{}, nil
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return nil, parseErr(path, 1, err.Error(), "a CPU list like 0-7,16")
	}
	return set, nil
}

// SMT is the kernel's simultaneous multithreading state.
type SMT struct {
	// Control is "on", "off", "forceoff", "notsupported" or "notimplemented".
	Control string `json:"control,omitempty"`
	// Active is nil when the file is absent.
	Active *bool `json:"active,omitempty"`
}

// SMT reads sys/devices/system/cpu/smt/{control,active}.
func (f FS) SMT() (SMT, error) {
	var s SMT
	ctl, err := readString(f.SysPath("devices/system/cpu/smt/control"))
	if err != nil {
		return s, err
	}
	s.Control = ctl
	if act, err := readString(f.SysPath("devices/system/cpu/smt/active")); err == nil {
		on := act == "1"
		s.Active = &on
	}
	return s, nil
}

// Node is one NUMA node.
type Node struct {
	ID   int        `json:"id"`
	CPUs cpuset.Set `json:"cpus"`
}

// Nodes reads sys/devices/system/node/nodeN/cpulist for every node.
func (f FS) Nodes() ([]Node, error) {
	dir := f.SysPath("devices/system/node")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var nodes []Node
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), "node")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(num)
		if err != nil || id < 0 || id >= cpuset.MaxID {
			continue
		}
		cpus, err := CPUListFile(filepath.Join(dir, e.Name(), "cpulist"))
		if err != nil && !IsAbsent(err) {
			return nil, err
		}
		nodes = append(nodes, Node{ID: id, CPUs: cpus})
	}
	slices.SortFunc(nodes, func(a, b Node) int { return a.ID - b.ID })
	return nodes, nil
}
