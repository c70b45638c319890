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
