package procfs

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// The CUDA driver API, recognised by what a mapped shared object exports
// rather than by its file name: libcuda.so on a GPU host, and any other
// library that exports the driver's entry point (gpufeed's simulated
// driver, a vendor shim, a renamed copy). A process that maps one has
// loaded a CUDA driver; runtimes load it only to initialise it (the CUDA
// runtime dlopens libcuda.so.1 on its first call and calls cuInit at once).
// Source: CUDA Driver API reference, "Initialization" (cuInit must be
// called before any other driver function).

// DriverEntry is the driver API's entry point: a library exporting it (a
// defined dynamic symbol) is a CUDA driver.
const DriverEntry = "cuInit"

// Bounds on what is read of one object: the hash-table lookup reads a few
// hundred bytes; an object without a hash table has its dynamic symbol
// table scanned only up to maxDynsymScan bytes (and its string table only
// where a symbol's name is compared).
const (
	maxDynsymScan = 4 << 20
	maxSymName    = 256
	// MaxDriverCandidates bounds the mapped objects checked per process.
	MaxDriverCandidates = 4096
	// maxExportCache bounds the cache of objects already read (by device
	// and inode); it is emptied when full.
	maxExportCache = 16384
)

// MappedObject is an executable file mapping of /proc/PID/maps: where it is
// mapped (for /proc/PID/map_files), its device and inode, and its path.
type MappedObject struct {
	Range string // "7f1c2a000000-7f1c2a100000"
	Dev   string // "08:01"
	Inode uint64
	Path  string
}

var exportCache = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// DriverAPILibraries returns, sorted by path, the objects among objs (the
// executable mappings of pid) that export DriverEntry. Each object is read
// through /proc/PID/map_files (the very file mapped, even when deleted or in
// another mount namespace), else through its path under the process's root,
// and the answer is cached by device and inode. An object that cannot be
// read, or is not ELF, is skipped.
func (fs FS) DriverAPILibraries(pid int, objs []MappedObject) []string {
	var out []string
	seen := map[string]bool{}
	for i, o := range objs {
		if i >= MaxDriverCandidates {
			break
		}
		key := fmt.Sprintf("%s:%d", o.Dev, o.Inode)
		if seen[key] {
			continue
		}
		seen[key] = true
		exportCache.Lock()
		ok, known := exportCache.m[key]
		exportCache.Unlock()
		if !known {
			var err error
			ok, err = fs.objectExports(pid, o, DriverEntry)
			if err != nil {
				continue // unreadable now: not cached, tried again next time
			}
			exportCache.Lock()
			if len(exportCache.m) >= maxExportCache {
				exportCache.m = map[string]bool{}
			}
			exportCache.m[key] = ok
			exportCache.Unlock()
		}
		if ok {
			out = append(out, o.Path)
		}
	}
	return out
}

func (fs FS) objectExports(pid int, o MappedObject, name string) (bool, error) {
	f, err := os.Open(fs.PidPath(pid, filepath.Join("map_files", o.Range)))
	if err != nil {
		f, err = os.Open(fs.PidPath(pid, filepath.Join("root", o.Path)))
		if err != nil {
			return false, err
		}
	}
	defer f.Close()
	return ExportsSymbol(f, name)
}

// ExportsSymbol says whether the ELF object r defines name as a global or
// weak function or object in its dynamic symbol table. It looks name up in
// the GNU or SysV hash table as the dynamic linker does, reading only the
// entries on name's chain; an object without either has its table scanned,
// at most maxDynsymScan bytes of it. A file that is not ELF exports nothing.
func ExportsSymbol(r io.ReaderAt, name string) (bool, error) {
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil || string(magic[:]) != elf.ELFMAG {
		return false, nil
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return false, nil // malformed: not a library the dynamic linker would load
	}
	dynsym := f.SectionByType(elf.SHT_DYNSYM)
	if dynsym == nil || dynsym.Link == 0 || int(dynsym.Link) >= len(f.Sections) {
		return false, nil
	}
	t := symTable{f: f, sym: dynsym, str: f.Sections[dynsym.Link], name: name}
	t.entSize = 24
	if f.Class == elf.ELFCLASS32 {
		t.entSize = 16
	}
	if gh := f.SectionByType(elf.SHT_GNU_HASH); gh != nil {
		return t.gnuLookup(gh)
	}
	if h := f.SectionByType(elf.SHT_HASH); h != nil {
		return t.sysvLookup(h)
	}
	return t.scan()
}

type symTable struct {
	f        *elf.File
	sym, str *elf.Section
	entSize  uint64
	name     string
}

func (t symTable) u32(s *elf.Section, off uint64) (uint32, error) {
	var b [4]byte
	if off+4 > s.Size {
		return 0, io.ErrUnexpectedEOF
	}
	if _, err := s.ReadAt(b[:], int64(off)); err != nil {
		return 0, err
	}
	return t.f.ByteOrder.Uint32(b[:]), nil
}

// matches says whether symbol i is name, defined, a function or object,
// global or weak.
func (t symTable) matches(i uint64) (bool, error) {
	off := i * t.entSize
	if off+t.entSize > t.sym.Size {
		return false, io.ErrUnexpectedEOF
	}
	e := make([]byte, t.entSize)
	if _, err := t.sym.ReadAt(e, int64(off)); err != nil {
		return false, err
	}
	bo := t.f.ByteOrder
	nameOff := uint64(bo.Uint32(e[0:4]))
	var info uint8
	var shndx uint16
	if t.entSize == 24 {
		info, shndx = e[4], bo.Uint16(e[6:8])
	} else {
		info, shndx = e[12], bo.Uint16(e[14:16])
	}
	if shndx == uint16(elf.SHN_UNDEF) {
		return false, nil
	}
	bind, typ := elf.ST_BIND(info), elf.ST_TYPE(info)
	if bind != elf.STB_GLOBAL && bind != elf.STB_WEAK || typ != elf.STT_FUNC && typ != elf.STT_OBJECT && typ != elf.STT_GNU_IFUNC {
		return false, nil
	}
	want := len(t.name) + 1
	if nameOff+uint64(want) > t.str.Size {
		return false, nil
	}
	b := make([]byte, want)
	if _, err := t.str.ReadAt(b, int64(nameOff)); err != nil {
		return false, err
	}
	return string(b[:len(t.name)]) == t.name && b[len(t.name)] == 0, nil
}

// gnuLookup follows DT_GNU_HASH: buckets of symbol indexes, each chain a run
// of hashes whose low bit ends it.
func (t symTable) gnuLookup(s *elf.Section) (bool, error) {
	nbuckets, err := t.u32(s, 0)
	if err != nil {
		return false, err
	}
	symoffset, err := t.u32(s, 4)
	if err != nil {
		return false, err
	}
	bloomSize, err := t.u32(s, 8)
	if err != nil {
		return false, err
	}
	if nbuckets == 0 {
		return false, nil
	}
	word := uint64(8)
	if t.f.Class == elf.ELFCLASS32 {
		word = 4
	}
	h := uint32(5381)
	for i := 0; i < len(t.name); i++ {
		h = h*33 + uint32(t.name[i])
	}
	buckets := 16 + uint64(bloomSize)*word
	idx, err := t.u32(s, buckets+4*uint64(h%nbuckets))
	if err != nil || idx == 0 || idx < symoffset {
		return false, err
	}
	chains := buckets + 4*uint64(nbuckets)
	for n := 0; n < 1<<20; n++ {
		ch, err := t.u32(s, chains+4*uint64(idx-symoffset))
		if err != nil {
			return false, err
		}
		if ch|1 == h|1 {
			ok, err := t.matches(uint64(idx))
			if err != nil || ok {
				return ok, err
			}
		}
		if ch&1 != 0 {
			return false, nil
		}
		idx++
	}
	return false, nil
}

// sysvLookup follows DT_HASH: nbucket, nchain, bucket[], chain[].
func (t symTable) sysvLookup(s *elf.Section) (bool, error) {
	nbucket, err := t.u32(s, 0)
	if err != nil || nbucket == 0 {
		return false, err
	}
	nchain, err := t.u32(s, 4)
	if err != nil {
		return false, err
	}
	var h uint32
	for i := 0; i < len(t.name); i++ {
		h = h<<4 + uint32(t.name[i])
		g := h & 0xf0000000
		h ^= g >> 24
		h &^= g
	}
	idx, err := t.u32(s, 8+4*uint64(h%nbucket))
	for n := uint32(0); err == nil && idx != 0 && idx < nchain && n < nchain; n++ {
		ok, merr := t.matches(uint64(idx))
		if merr != nil || ok {
			return ok, merr
		}
		idx, err = t.u32(s, 8+4*uint64(nbucket)+4*uint64(idx))
	}
	return false, err
}

// scan reads the dynamic symbol table, bounded, when there is no hash table.
func (t symTable) scan() (bool, error) {
	n := min(t.sym.Size, maxDynsymScan) / t.entSize
	for i := uint64(1); i < n; i++ {
		ok, err := t.matches(i)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
