package pysample

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// mapping is one line of /proc/PID/maps that maps a file.
type mapping struct {
	start, end, offset uint64
	path               string
}

// maxMapsBytes bounds what is read of /proc/PID/maps.
const maxMapsBytes = procfs.MaxMapsBytes

// readMaps reads the file-backed mappings of pid.
func readMaps(fs procfs.FS, pid int) ([]mapping, error) {
	p := fs.PidPath(pid, "maps")
	f, err := os.Open(p)
	if err != nil {
		return nil, procError(p, err)
	}
	defer f.Close()
	return parseMaps(io.LimitReader(f, maxMapsBytes))
}

// parseMaps reads "start-end perms offset dev inode   path" lines.
func parseMaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<10)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") {
			continue
		}
		se := strings.SplitN(f[0], "-", 2)
		if len(se) != 2 {
			return out, fmt.Errorf("maps line %d: expected START-END, got %q", n, f[0])
		}
		s, err1 := strconv.ParseUint(se[0], 16, 64)
		e, err2 := strconv.ParseUint(se[1], 16, 64)
		o, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || e < s {
			return out, fmt.Errorf("maps line %d: expected hexadecimal START-END and OFFSET, got %q", n, sc.Text())
		}
		p := strings.Join(f[5:], " ")
		out = append(out, mapping{start: s, end: e, offset: o, path: strings.TrimSuffix(p, " (deleted)")})
	}
	return out, sc.Err()
}

// binary is the ELF object that holds the interpreter: its symbols'
// addresses in the target (load bias applied) and its version.
type pyBinary struct {
	path                 string
	runtime              uint64 // &_PyRuntime
	codeType, unicodeTyp uint64 // &PyCode_Type, &PyUnicode_Type (0: unknown)
	bytesType            uint64
	major, minor, patch  int
	version              string
}

var libpythonRe = regexp.MustCompile(`^libpython(\d)\.(\d+)`)
var exeRe = regexp.MustCompile(`^python(\d)\.(\d+)`)

// findBinary picks, among what pid maps, libpython (a shared build) or
// else the executable (a static build, like Debian's), and reads its
// symbols through the process's own root (so a container's files are
// read, not the host's).
func findBinary(fs procfs.FS, pid int, maps []mapping) (*pyBinary, error) {
	var cands []string
	seen := map[string]bool{}
	for _, m := range maps {
		if libpythonRe.MatchString(path.Base(m.path)) && !seen[m.path] {
			seen[m.path] = true
			cands = append(cands, m.path)
		}
	}
	if exe, err := os.Readlink(fs.PidPath(pid, "exe")); err == nil && !seen[exe] {
		cands = append(cands, strings.TrimSuffix(exe, " (deleted)"))
	}
	var firstErr error
	for _, c := range cands {
		b, err := readBinary(fs.PidPath(pid, "root")+c, c, maps)
		if err == nil {
			return b, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errors.New("no python executable or libpython is mapped")
	}
	return nil, &NotPythonError{PID: pid, Err: firstErr}
}

// NotPythonError says the process holds no CPython interpreter the reader
// recognises.
type NotPythonError struct {
	PID int
	Err error
}

func (e *NotPythonError) Error() string {
	return fmt.Sprintf("pid %d: not a CPython process: %v", e.PID, e.Err)
}
func (e *NotPythonError) Unwrap() error { return e.Err }

// maxSymbols bounds the symbol tables read of one object.
const maxSymbols = 1 << 20

// elfFacts is what is read of one interpreter file, the same for every
// process that maps it (the load bias is each process's own).
type elfFacts struct {
	syms                map[string]uint64
	typ                 elf.Type
	progs               []elf.ProgHeader
	major, minor, patch int
	version             string
}

// factsCache keeps elfFacts by file identity (path, size, mtime): the
// ranks and workers of a job share one interpreter file, read once.
var factsCache = struct {
	sync.Mutex
	m map[string]*elfFacts
}{m: map[string]*elfFacts{}}

const maxFactsCache = 32

func readBinary(file, mapped string, maps []mapping) (*pyBinary, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mapped, err)
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", file, st.Size(), st.ModTime().UnixNano())
	factsCache.Lock()
	facts := factsCache.m[key]
	factsCache.Unlock()
	if facts == nil {
		if facts, err = readFacts(file, mapped); err != nil {
			return nil, err
		}
		factsCache.Lock()
		if len(factsCache.m) >= maxFactsCache {
			clear(factsCache.m)
		}
		factsCache.m[key] = facts
		factsCache.Unlock()
	}
	bias, err := loadBias(facts.typ, facts.progs, facts.syms["_PyRuntime"], mapped, maps)
	if err != nil {
		return nil, err
	}
	b := &pyBinary{path: mapped, runtime: facts.syms["_PyRuntime"] + bias, major: facts.major, minor: facts.minor, patch: facts.patch, version: facts.version}
	for name, dst := range map[string]*uint64{"PyCode_Type": &b.codeType, "PyUnicode_Type": &b.unicodeTyp, "PyBytes_Type": &b.bytesType} {
		if v, ok := facts.syms[name]; ok {
			*dst = v + bias
		}
	}
	return b, nil
}

// wantedSymbols are the symbols the reader looks up.
var wantedSymbols = []string{"_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type"}

func readFacts(file, mapped string) (*elfFacts, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mapped, err)
	}
	defer f.Close()
	want := map[string]elf.Symbol{}
	// The dynamic symbols hold them all in every build that exports its
	// C API (shared or static); the full table only when they do not.
	for _, get := range []func() ([]elf.Symbol, error){f.DynamicSymbols, f.Symbols} {
		if len(want) == len(wantedSymbols) {
			break
		}
		syms, err := get()
		if err != nil || len(syms) > maxSymbols {
			continue
		}
		for _, s := range syms {
			switch s.Name {
			case "_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type":
				if _, ok := want[s.Name]; !ok && s.Value != 0 {
					want[s.Name] = s
				}
			}
		}
	}
	if _, ok := want["_PyRuntime"]; !ok {
		return nil, fmt.Errorf("%s: no _PyRuntime symbol", mapped)
	}
	facts := &elfFacts{syms: map[string]uint64{}, typ: f.Type}
	for name, s := range want {
		facts.syms[name] = s.Value
	}
	for _, p := range f.Progs {
		facts.progs = append(facts.progs, p.ProgHeader)
	}
	b := &pyBinary{path: mapped}
	if err := b.readVersion(f, want); err != nil {
		return nil, fmt.Errorf("%s: %w", mapped, err)
	}
	facts.major, facts.minor, facts.patch, facts.version = b.major, b.minor, b.patch, b.version
	return facts, nil
}

// loadBias is where the object was loaded relative to its link-time
// addresses: the mapping of the segment holding vaddr, at that segment's
// file offset, starts at its page-aligned address plus the bias (0 for a
// non-PIE executable).
func loadBias(typ elf.Type, progs []elf.ProgHeader, vaddr uint64, mapped string, maps []mapping) (uint64, error) {
	const page = 4096
	for _, p := range progs {
		if p.Type != elf.PT_LOAD || vaddr < p.Vaddr || vaddr >= p.Vaddr+p.Memsz {
			continue
		}
		if typ == elf.ET_EXEC {
			return 0, nil
		}
		off := p.Off &^ (page - 1)
		for _, m := range maps {
			if m.path == mapped && m.offset == off {
				return m.start - p.Vaddr&^(page-1), nil
			}
		}
		// A writable segment's tail (.bss) may have no file mapping of its
		// own: use the first segment's mapping.
		for _, q := range progs {
			if q.Type == elf.PT_LOAD {
				for _, m := range maps {
					if m.path == mapped && m.offset == q.Off&^(page-1) {
						return m.start - q.Vaddr&^(page-1), nil
					}
				}
				break
			}
		}
		return 0, fmt.Errorf("%s: the segment holding _PyRuntime is not mapped", mapped)
	}
	return 0, fmt.Errorf("%s: _PyRuntime lies in no loadable segment", mapped)
}

// versionRe finds PY_VERSION ("3.8.18", "3.10.0rc2"), a NUL-terminated
// literal in the object's read-only data; the linker may have merged it
// into the tail of a longer string (the install prefix, which ends in it),
// so what precedes it is not asked for.
var versionRe = regexp.MustCompile(`([23])\.(\d{1,2})\.(\d{1,2})(?:(?:a|b|rc)\d{1,2})?\+?\x00`)

// maxRodata bounds the read-only data scanned for the version string.
const maxRodata = 64 << 20

// readVersion reads Py_Version (3.11+: PY_VERSION_HEX, a const in the
// object's file) or else finds the build's version string; the file name
// (libpython3.8.so, python3.8) must agree when it names one.
func (b *pyBinary) readVersion(f *elf.File, syms map[string]elf.Symbol) error {
	if s, ok := syms["Py_Version"]; ok {
		if v, err := readConst(f, s.Value, 4); err == nil {
			hex := uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24
			b.major, b.minor, b.patch = int(hex>>24), int(hex>>16&0xff), int(hex>>8&0xff)
		}
	}
	if b.major == 0 {
		if sec := f.Section(".rodata"); sec != nil && sec.Size <= maxRodata {
			if data, err := sec.Data(); err == nil {
				// the first literal of the minor version the file's name
				// says (or the first at all when it says none)
				named := nameVersion(path.Base(b.path))
				for _, m := range versionRe.FindAllSubmatch(data, 64) {
					maj, _ := strconv.Atoi(string(m[1]))
					mnr, _ := strconv.Atoi(string(m[2]))
					if named != nil && (maj != named[0] || mnr != named[1]) {
						continue
					}
					b.major, b.minor = maj, mnr
					b.patch, _ = strconv.Atoi(string(m[3]))
					break
				}
			}
		}
	}
	if n := nameVersion(path.Base(b.path)); n != nil {
		maj, mnr := n[0], n[1]
		if b.major == 0 {
			b.major, b.minor, b.patch = maj, mnr, -1
		} else if maj != b.major || mnr != b.minor {
			return fmt.Errorf("its name says Python %d.%d, its version data %d.%d", maj, mnr, b.major, b.minor)
		}
	}
	if b.major == 0 {
		return errors.New("no Python version found in it")
	}
	b.version = strconv.Itoa(b.major) + "." + strconv.Itoa(b.minor)
	if b.patch >= 0 {
		b.version += "." + strconv.Itoa(b.patch)
	}
	return nil
}

// nameVersion is the major and minor version a file name says
// (libpython3.8.so.1.0, python3.11), nil when it says none.
func nameVersion(base string) []int {
	m := libpythonRe.FindStringSubmatch(base)
	if m == nil {
		m = exeRe.FindStringSubmatch(base)
	}
	if m == nil {
		return nil
	}
	maj, _ := strconv.Atoi(m[1])
	mnr, _ := strconv.Atoi(m[2])
	return []int{maj, mnr}
}

// readConst reads n bytes at a link-time address from the file's sections.
func readConst(f *elf.File, vaddr uint64, n int) ([]byte, error) {
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS || vaddr < s.Addr || vaddr+uint64(n) > s.Addr+s.Size {
			continue
		}
		buf := make([]byte, n)
		if _, err := s.ReadAt(buf, int64(vaddr-s.Addr)); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return nil, errors.New("address in no section with data")
}
