package cpusample

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// mapping is one executable mapping of a process (PROC/PID/maps).
type mapping struct {
	start, end, off uint64
	dev             string
	inode           uint64
	path            string
}

// parseMaps reads the executable mappings of a maps file. A malformed line
// is an error naming its position.
func parseMaps(name string, data []byte) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 {
			return nil, fmt.Errorf("%s: line %d: want address, permissions, offset, device and inode, got %q", name, n, line)
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		inode, err4 := strconv.ParseUint(f[4], 10, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil || err4 != nil || end < start || len(f[1]) < 4 {
			return nil, fmt.Errorf("%s: line %d: want start-end perms offset dev inode [path], got %q", name, n, line)
		}
		if f[1][2] != 'x' {
			continue
		}
		path := ""
		if len(f) > 5 {
			// The path is the rest of the line (it may hold spaces).
			path = strings.TrimSpace(line[strings.Index(line, f[5]):])
		}
		out = append(out, mapping{start: start, end: end, off: off, dev: f[3], inode: inode, path: path})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out, nil
}

// find returns the mapping holding addr.
func find(ms []mapping, addr uint64) (mapping, bool) {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].end > addr })
	if i < len(ms) && ms[i].start <= addr {
		return ms[i], true
	}
	return mapping{}, false
}

// symbol is one function of an ELF file, at its link-time address.
type symbol struct {
	addr, size uint64
	name       string
}

// elfFile is what symbolising needs of one file: its loadable segments (to
// turn a file offset into a link-time address, which is how a PIE or shared
// object's load bias drops out) and its function symbols, sorted.
type elfFile struct {
	loads []elf.ProgHeader
	syms  []symbol
	err   error
}

// openELF reads path's segments and function symbols (.symtab, else
// .dynsym, both where present; a separate debug file found by build ID
// under /usr/lib/debug adds the local ones a stripped library lacks).
func openELF(path string) *elfFile {
	f, err := elf.Open(path)
	if err != nil {
		return &elfFile{err: err}
	}
	defer f.Close()
	e := &elfFile{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			e.loads = append(e.loads, p.ProgHeader)
		}
	}
	add := func(ss []elf.Symbol) {
		for _, s := range ss {
			t := elf.ST_TYPE(s.Info)
			if (t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC) && s.Value != 0 && s.Name != "" {
				e.syms = append(e.syms, symbol{addr: s.Value, size: s.Size, name: s.Name})
			}
		}
	}
	if ss, err := f.Symbols(); err == nil {
		add(ss)
	} else if dbg := debugFile(f); dbg != "" {
		if df, err := elf.Open(dbg); err == nil {
			if ss, err := df.Symbols(); err == nil {
				add(ss)
			}
			df.Close()
		}
	}
	if ss, err := f.DynamicSymbols(); err == nil {
		add(ss)
	}
	sort.Slice(e.syms, func(i, j int) bool {
		if e.syms[i].addr != e.syms[j].addr {
			return e.syms[i].addr < e.syms[j].addr
		}
		return e.syms[i].size > e.syms[j].size
	})
	return e
}

// debugFile is the separate debug file of f by its GNU build ID, "" when
// there is none.
func debugFile(f *elf.File) string {
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16+2 {
		return ""
	}
	namesz := f.ByteOrder.Uint32(b[0:4])
	descsz := f.ByteOrder.Uint32(b[4:8])
	off := 12 + (namesz+3)&^3
	if uint64(off)+uint64(descsz) > uint64(len(b)) || descsz < 2 {
		return ""
	}
	id := fmt.Sprintf("%x", b[off:off+descsz])
	p := filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// lookup names the function holding the file offset off: the symbol whose
// range holds its link-time address. An address past every sized symbol's
// end has no name (a stripped library's internal code is not given its
// nearest export's name).
func (e *elfFile) lookup(off uint64) string {
	if e.err != nil {
		return ""
	}
	var vaddr uint64
	found := false
	for _, p := range e.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			vaddr, found = off-p.Off+p.Vaddr, true
			break
		}
	}
	if !found {
		return ""
	}
	i := sort.Search(len(e.syms), func(i int) bool { return e.syms[i].addr > vaddr })
	for j := i - 1; j >= 0 && j >= i-8; j-- {
		s := e.syms[j]
		if vaddr < s.addr+s.size {
			return s.name
		}
	}
	return ""
}
