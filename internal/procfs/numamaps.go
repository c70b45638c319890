package procfs

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
)

// NUMAMaps summarises /proc/PID/numa_maps: where the process's resident
// pages live, and the memory policies its mappings carry.
type NUMAMaps struct {
	// BytesByNode is resident memory per NUMA node.
	BytesByNode map[int]uint64 `json:"bytes_by_node"`
	// Policies counts mappings per policy ("default", "bind:1", "interleave:0-1").
	Policies map[string]int `json:"policies"`
	// Mappings is the number of lines read.
	Mappings int `json:"mappings"`
	// Truncated is true when the file was larger than the read cap.
	Truncated bool `json:"truncated,omitempty"`
}

// Nodes returns the node numbers holding memory, ascending.
func (m NUMAMaps) Nodes() []int {
	var out []int
	for n := range m.BytesByNode {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Total is the resident memory the file accounts for.
func (m NUMAMaps) Total() uint64 {
	var t uint64
	for _, b := range m.BytesByNode {
		t += b
	}
	return t
}

// NUMAMaps reads proc/PID/numa_maps. Reading it walks the page tables of the
// process (it needs ptrace-read access); for a very large process the read is
// capped and Truncated set.
func (f FS) NUMAMaps(pid int) (NUMAMaps, error) {
	p := f.ProcPath(PIDDir(pid), "numa_maps")
	data, truncated, err := readPrefix(p, PrivPtraceRead, ErrVanished, DefaultMaxRead)
	if err != nil {
		return NUMAMaps{}, err
	}
	if truncated {
		// Drop the partial last line.
		if i := strings.LastIndexByte(string(data), '\n'); i >= 0 {
			data = data[:i+1]
		}
	}
	m, err := ParseNUMAMaps(p, data)
	m.Truncated = truncated
	return m, err
}

// ParseNUMAMaps parses numa_maps lines: "ADDR POLICY [key=value | flag]...",
// where N<node>=<pages> counts pages on a node and kernelpagesize_kB gives
// the page size of the mapping (4 for base pages, 2048 for huge pages).
func ParseNUMAMaps(path string, data []byte) (NUMAMaps, error) {
	m := NUMAMaps{BytesByNode: map[int]uint64{}, Policies: map[string]int{}}
	for i, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 2 {
			return m, parseErr(path, i+1, "", "an address and a policy")
		}
		if _, err := strconv.ParseUint(fields[0], 16, 64); err != nil {
			return m, parseErr(path, i+1, "address "+strconv.Quote(fields[0]), "hexadecimal")
		}
		m.Mappings++
		m.Policies[fields[1]]++
		pageKB := uint64(4)
		pages := map[int]uint64{}
		for _, kv := range fields[2:] {
			key, val, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			switch {
			case key == "kernelpagesize_kB":
				v, err := strconv.ParseUint(val, 10, 64)
				if err != nil || v == 0 || v > 1<<30 {
					return m, parseErr(path, i+1, "kernelpagesize_kB "+strconv.Quote(val), "a page size in KiB")
				}
				pageKB = v
			case len(key) > 1 && key[0] == 'N' && key[1] >= '0' && key[1] <= '9':
				node, err := strconv.Atoi(key[1:])
				if err != nil || node >= cpuset.MaxID {
					return m, parseErr(path, i+1, strconv.Quote(kv), "N<node>=<pages>")
				}
				v, err := strconv.ParseUint(val, 10, 64)
				if err != nil {
					return m, parseErr(path, i+1, strconv.Quote(kv), "a page count")
				}
				pages[node] += v
			}
		}
		for node, n := range pages {
			m.BytesByNode[node] += n * pageKB * 1024
		}
	}
	return m, nil
}
