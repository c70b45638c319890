package procfs

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
	b, err := readFileRaw(statm, PrivProcMount, ErrVanished, capSmallFile)
	if err != nil {
		return 0, err
	}
	var sm Statm
	if err := ParseStatm(b, &sm); err != nil {
		if pe, ok := err.(*ParseError); ok {
			pe.File = statm
		}
		return 0, err
	}
	return sm.Size, nil
}
