package procfs

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// testdata/smaps/{parent,child}: a Python process holding a list of 400,000
// float objects (about 9 MiB) and its forked child after it read the first
// half (each read writes the object's reference count: copy-on-write).
// The figures were summed from the files by an independent script.
func TestMatchInheritedForkedPython(t *testing.T) {
	read := func(name string) []AnonMapping {
		f, err := os.Open("testdata/smaps/" + name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := ParseAnonMappings(name, f, MaxSmapsBytes)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	parent, child := read("parent"), read("child")
	if len(parent) != 13 || len(child) != 13 {
		t.Fatalf("anonymous private writable mappings: parent %d, child %d; want 13 each", len(parent), len(child))
	}
	got := MatchInherited(parent, child)
	want := Inherited{Mappings: 13, Copied: 7323648, Shared: 14446592, ParentRSS: 21770240}
	if got != want {
		t.Errorf("MatchInherited = %+v, want %+v", got, want)
	}
	// A mapping the parent grew since the fork is not matched.
	grown := append([]AnonMapping(nil), parent...)
	grown[0].End += 4096
	if g := MatchInherited(grown, child); g.Mappings != 12 || g.Copied != want.Copied-child[0].PrivateDirty {
		t.Errorf("with the first mapping grown: %+v", g)
	}
	if g := MatchInherited(nil, child); g != (Inherited{}) {
		t.Errorf("no parent mappings: %+v", g)
	}
}

func TestParseAnonMappingsKeepsAnonymousPrivateWritable(t *testing.T) {
	text := `00400000-00401000 r-xp 00000000 08:01 1234   /usr/bin/python3.11
Rss:                   4 kB
Private_Dirty:         0 kB
01000000-02000000 rw-p 00000000 00:00 0      [heap]
Rss:                1024 kB
Shared_Clean:          4 kB
Shared_Dirty:        512 kB
Private_Dirty:       508 kB
VmFlags: rd wr mr mw me ac sd
7f0000000000-7f0000100000 rw-p 00000000 00:00 0 
Rss:                 100 kB
Private_Dirty:       100 kB
THPeligible:    0
7f0000100000-7f0000200000 rw-s 00000000 00:01 77     /dev/zero (deleted)
Rss:                 100 kB
7f0000200000-7f0000300000 r--p 00000000 00:00 0 
Rss:                 100 kB
7f0000300000-7f0000400000 rw-p 00000000 00:00 0      [anon:arena]
Private_Dirty:         8 kB
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0      [stack]
Rss:                  12 kB
`
	m, err := ParseAnonMappings("smaps", strings.NewReader(text), MaxSmapsBytes)
	if err != nil {
		t.Fatal(err)
	}
	want := []AnonMapping{
		{Start: 0x01000000, End: 0x02000000, RSS: 1024 << 10, PrivateDirty: 508 << 10, Shared: 516 << 10},
		{Start: 0x7f0000000000, End: 0x7f0000100000, RSS: 100 << 10, PrivateDirty: 100 << 10},
		{Start: 0x7f0000300000, End: 0x7f0000400000, PrivateDirty: 8 << 10},
	}
	if len(m) != len(want) {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	for i := range want {
		if m[i] != want[i] {
			t.Errorf("mapping %d: %+v, want %+v", i, m[i], want[i])
		}
	}
}

func TestParseAnonMappingsRejects(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"Rss: 4 kB\n", "smaps: line 1: Rss: 4 kB: expected a mapping's header"},
		{"zz-01 rw-p 0 00:00 0\n", "smaps: line 1: zz-01 rw-p 0 00:00 0: expected start-end perms offset dev inode [path]"},
		{"01-02 rw-p 0 00:00 0\nRss: many kB\n", "smaps: line 2: Rss: many kB: expected Rss: N kB"},
		{"01-02 rw-p 0 00:00 0\nPrivate_Dirty: 4 MB\n", "smaps: line 2: Private_Dirty: 4 MB: expected Private_Dirty: N kB"},
		{"02-01 rw-p 0 00:00 0\n", "expected start-end"},
	} {
		_, err := ParseAnonMappings("smaps", strings.NewReader(c.text), MaxSmapsBytes)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want a parse error containing %q", c.text, err, c.want)
		}
	}
	big := strings.Repeat("01-02 rw-p 0 00:00 0\nRss: 4 kB\n", 100)
	if _, err := ParseAnonMappings("smaps", strings.NewReader(big), 1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the cap: %v, want ErrTooLarge", err)
	}
}

func FuzzParseAnonMappings(f *testing.F) {
	for _, name := range []string{"parent", "child"} {
		b, err := os.ReadFile("testdata/smaps/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 4000)])
	}
	f.Add([]byte("01-02 rw-p 0 00:00 0\nRss: 4 kB\nShared_Dirty: 4 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseAnonMappings("smaps", strings.NewReader(string(b)), 1<<20)
		if err != nil {
			return
		}
		for i, x := range m {
			if x.End < x.Start || i > 0 && m[i-1].Start > x.Start {
				t.Fatalf("mapping %d: %+v", i, x)
			}
		}
		_ = MatchInherited(m, m)
	})
}
