package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// Copy-on-write of a forked child. fork(2) gives the child its parent's
// mappings at the same addresses, every anonymous page shared until one of
// the two writes it: the writer then gets a copy of its own (kernel docs,
// Documentation/filesystems/proc.rst: Private_Dirty counts pages mapped by
// this process alone and written). A forked child's Private_Dirty at
// addresses its parent also has mapped is therefore what it has copied of
// its parent's memory (a fresh fork holds almost none: the
// few pages it wrote since); its Shared_* there is what it still shares and
// can still copy.

// MaxSmapsBytes bounds what is read of /proc/PID/smaps: each mapping takes
// about 1.2 KiB of text, a PyTorch process a few hundred mappings (well under
// 1 MiB); 32 MiB is some 27,000 mappings.
const MaxSmapsBytes = 32 << 20

// AnonMapping is one anonymous, private, writable mapping of smaps (the
// heap, malloc arenas, Python's object arenas, anonymous mmaps), in bytes.
type AnonMapping struct {
	Start, End   uint64
	RSS          uint64
	PrivateDirty uint64
	// Shared is Shared_Clean + Shared_Dirty: resident pages another process
	// maps too.
	Shared uint64
}

// AnonMappings reads the anonymous private writable mappings of PROC/PID/smaps,
// sorted by address. Reading smaps walks every page table of the process
// (milliseconds per GiB resident): callers keep it on a slow, budgeted tier.
func (fs FS) AnonMappings(pid int) ([]AnonMapping, error) {
	p := fs.PidPath(pid, "smaps")
	f, err := os.Open(p)
	if err != nil {
		return nil, classify(p, PrivPtraceRead, ErrVanished, err)
	}
	defer f.Close()
	m, err := ParseAnonMappings(p, f, MaxSmapsBytes)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) || errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, classify(p, PrivPtraceRead, ErrVanished, err)
	}
	return m, nil
}

// ParseAnonMappings parses smaps text: a header per mapping ("start-end
// perms offset dev inode [path]") followed by "Key: N kB" lines (and a few
// without a unit: VmFlags, THPeligible, ProtectionKey). It keeps the
// anonymous (inode 0, no path, [heap] or [anon:NAME]), private, writable
// mappings. More than maxBytes of text is ErrTooLarge (a prefix would
// undercount without saying so).
func ParseAnonMappings(file string, r io.Reader, maxBytes int64) ([]AnonMapping, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []AnonMapping
	var cur *AnonMapping // the current mapping when it is kept
	inMapping := false
	var read int64
	lineNo := 0
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, parseErr(file, lineNo+1, string(line), "a line under 64 KiB")
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		read += int64(len(line))
		if read > maxBytes {
			return nil, fmt.Errorf("%s: %w: more than %d bytes", file, ErrTooLarge, maxBytes)
		}
		if len(line) > 0 {
			lineNo++
			line = bytes.TrimRight(line, "\n")
			first, next := nextField(line, 0)
			switch {
			case len(first) == 0:
				// an empty line: nothing to read
			case first[len(first)-1] == ':':
				if !inMapping {
					return nil, parseErr(file, lineNo, string(line), "a mapping's header (start-end perms offset dev inode path) before its fields")
				}
				if cur != nil {
					if perr := smapsField(file, lineNo, first[:len(first)-1], line, next, cur); perr != nil {
						return nil, perr
					}
				}
			default:
				m, keep, ok := smapsHeader(line)
				if !ok {
					return nil, parseErr(file, lineNo, string(line), "start-end perms offset dev inode [path]")
				}
				inMapping = true
				cur = nil
				if keep {
					out = append(out, m)
					cur = &out[len(out)-1]
				}
			}
		}
		if err == io.EOF {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out, nil
}

// smapsField stores one "Key: N kB" line of a kept mapping.
func smapsField(file string, lineNo int, key, line []byte, at int, m *AnonMapping) error {
	var dst *uint64
	add := false
	switch string(key) {
	case "Rss":
		dst = &m.RSS
	case "Private_Dirty":
		dst = &m.PrivateDirty
	case "Shared_Clean", "Shared_Dirty":
		dst, add = &m.Shared, true
	default:
		return nil
	}
	f, next := nextField(line, at)
	v, ok := parseUint(f)
	unit, _ := nextField(line, next)
	if !ok || string(unit) != "kB" || v > 1<<53 {
		return parseErr(file, lineNo, string(line), string(key)+": N kB")
	}
	if add {
		*dst += v * 1024
	} else {
		*dst = v * 1024
	}
	return nil
}

// smapsHeader parses a mapping's header line; keep says it is anonymous,
// private and writable.
func smapsHeader(line []byte) (m AnonMapping, keep, ok bool) {
	rng, i := nextField(line, 0)
	perms, i := nextField(line, i)
	_, i = nextField(line, i) // offset
	dev, i := nextField(line, i)
	inode, i := nextField(line, i)
	dash := bytes.IndexByte(rng, '-')
	if dash < 0 || len(perms) != 4 || len(dev) == 0 || len(inode) == 0 {
		return m, false, false
	}
	start, ok1 := parseHex(rng[:dash])
	end, ok2 := parseHex(rng[dash+1:])
	if !ok1 || !ok2 || end < start {
		return m, false, false
	}
	if _, ok := parseUint(inode); !ok {
		return m, false, false
	}
	m.Start, m.End = start, end
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	path := line[i:]
	anon := string(inode) == "0" && (len(path) == 0 || string(path) == "[heap]" || bytes.HasPrefix(path, []byte("[anon:")))
	return m, anon && perms[1] == 'w' && perms[3] == 'p', true
}

// parseHex parses a lower- or upper-case hexadecimal address of at most 16 digits.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// Inherited is what a forked child holds in the anonymous mappings it
// shares with its parent (those the parent's anonymous mappings cover), in
// bytes.
type Inherited struct {
	// Mappings counts the child's mappings the parent's cover, wholly or
	// in part.
	Mappings int
	// Copied is the child's Private_Dirty there: pages it holds a copy of
	// its own.
	Copied uint64
	// Shared is the child's Shared_Clean + Shared_Dirty there: pages it
	// still shares (with its parent or a sibling), the most it can still copy.
	Shared uint64
	// ParentRSS is the parent's resident memory at the same addresses.
	ParentRSS uint64
}

// MatchInherited sums the child's mappings over the addresses the parent's
// anonymous mappings cover (both sorted by start, as AnonMappings returns
// them). Bounds move after the fork without the memory changing hands: the
// kernel merges a mapping with a neighbour mmap'd beside it, brk grows the
// heap, malloc grows an arena. Matching the same start and end only, a
// worker's 15 MiB of copies left the figure and came back as its parent
// mmap'd and freed a neighbouring megabyte (a real DataLoader, watched
// every 50 ms). So a child's mapping inside the parent's is counted whole,
// and one partly covered in proportion to the part covered (smaps gives a
// mapping's pages as one figure: they are taken as spread evenly); the
// parent's RSS likewise, in proportion to the part of its mapping that the
// child's covers. A mapping both allocated after the fork at the same
// address (a forked child's layout mirrors its parent's) matches too: smaps
// cannot tell it from an inherited one, and its pages count as copies.
func MatchInherited(parent, child []AnonMapping) Inherited {
	var in Inherited
	i := 0
	for _, c := range child {
		if c.End <= c.Start {
			continue
		}
		for i < len(parent) && parent[i].End <= c.Start {
			i++
		}
		var covered uint64
		parentRSS := 0.0
		for j := i; j < len(parent) && parent[j].Start < c.End; j++ {
			p := parent[j]
			lo, hi := max(p.Start, c.Start), min(p.End, c.End)
			if hi <= lo {
				continue
			}
			covered += hi - lo
			if lo == p.Start && hi == p.End {
				parentRSS += float64(p.RSS)
			} else {
				parentRSS += float64(p.RSS) * float64(hi-lo) / float64(p.End-p.Start)
			}
		}
		if covered == 0 {
			continue
		}
		in.Mappings++
		in.ParentRSS += uint64(math.Round(parentRSS))
		if size := c.End - c.Start; covered >= size {
			in.Copied += c.PrivateDirty
			in.Shared += c.Shared
		} else {
			f := float64(covered) / float64(size)
			in.Copied += uint64(math.Round(float64(c.PrivateDirty) * f))
			in.Shared += uint64(math.Round(float64(c.Shared) * f))
		}
	}
	return in
}
