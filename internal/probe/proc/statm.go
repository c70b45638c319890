package proc

// Statm is /proc/PID/statm in pages.
type Statm struct {
	Size, Resident, Shared uint64
}

// ParseStatm parses the first three fields of statm without allocating.
func ParseStatm(b []byte, s *Statm) error {
	i := 0
	for k := 0; k < 3; k++ {
		f, next := nextField(b, i)
		v, ok := parseUint(f)
		if !ok {
			return &ParseError{File: "statm", Offset: i, Want: "size resident shared (pages) as unsigned integers"}
		}
		switch k {
		case 0:
			s.Size = v
		case 1:
			s.Resident = v
		case 2:
			s.Shared = v
		}
		i = next
	}
	return nil
}
