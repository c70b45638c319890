package procfs

import (
	"os"
	"slices"
)

// RDMADevices lists the RDMA devices (InfiniBand HCAs, RoCE NICs) under
// sys/class/infiniband, sorted. The directory exists only where an RDMA
// driver is loaded: absent means no RDMA device, an empty list too.
func (f FS) RDMADevices() ([]string, error) {
	entries, err := os.ReadDir(f.SysPath("class/infiniband"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names, nil
}
