package procfs

import (
	"fmt"
	"os"
)

// Statm is /proc/PID/statm in pages.
type Statm struct {
	Size, Resident, Shared uint64
}

// ParseStatm parses the first three fields of statm without allocating.
func ParseStatm(b []byte, s *Statm) error {
	if at, ok := parseUintFields(b, &s.Size, &s.Resident, &s.Shared); !ok {
		return &ParseError{File: "statm", Offset: at, Want: "size resident shared (pages) as unsigned integers"}
	}
	return nil
}

// AddressSpacePages reads the size of a process's address space (statm's
// first field, pages) from its statm file. A mapping added (dlopen, a JIT's
// code, a thread's stack) changes it: readers of the much longer maps file
// read it again only when this moved.
func AddressSpacePages(statm string) (uint64, error) {
	var buf [128]byte
	f, err := os.Open(statm)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.Read(buf[:])
	if err != nil {
		return 0, fmt.Errorf("%s: %w", statm, err)
	}
	var sm Statm
	if err := ParseStatm(buf[:n], &sm); err != nil {
		return 0, fmt.Errorf("%s: %w", statm, err)
	}
	return sm.Size, nil
}
