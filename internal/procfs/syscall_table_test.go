package procfs

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// readUnistd parses "#define __NR_name N" (and asm-generic's __NR3264_name)
// lines of a kernel uapi header.
func readUnistd(t *testing.T, path string) map[string]int {
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("%s not installed (linux-libc-dev): %v", path, err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 || fs[0] != "#define" {
			continue
		}
		name := fs[1]
		switch {
		case strings.HasPrefix(name, "__NR3264_"):
			name = strings.TrimPrefix(name, "__NR3264_")
		case strings.HasPrefix(name, "__NR_"):
			name = strings.TrimPrefix(name, "__NR_")
		default:
			continue
		}
		if n, err := strconv.Atoi(fs[2]); err == nil {
			out[name] = n
		}
	}
	return out
}

func checkTable(t *testing.T, table map[int]string, header map[string]int, alias map[string]string) {
	for nr, name := range table {
		hname := name
		if a, ok := alias[name]; ok {
			hname = a
		}
		want, ok := header[hname]
		if !ok {
			t.Errorf("%s (%d) is not in the header", name, nr)
			continue
		}
		if want != nr {
			t.Errorf("%s: table says %d, header says %d", name, nr, want)
		}
	}
}

func TestSyscallTableX8664MatchesHeader(t *testing.T) {
	checkTable(t, syscallsX8664, readUnistd(t, "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), nil)
}

func TestSyscallTableARM64MatchesHeader(t *testing.T) {
	// asm-generic names the 64-bit variants fstatat/fstat/... under __NR3264_.
	checkTable(t, syscallsARM64, readUnistd(t, "/usr/include/asm-generic/unistd.h"), map[string]string{"newfstatat": "fstatat"})
}
