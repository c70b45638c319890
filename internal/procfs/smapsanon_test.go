package procfs

import (
	"errors"
	"math"
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
	// A mapping the parent grew since the fork (brk, a neighbour merged
	// in) still covers the child's: matched whole. Its RSS counts in
	// proportion to the part the child's covers.
	grown := append([]AnonMapping(nil), parent...)
	grown[0].Start -= 1 << 20
	grown[0].RSS += 1 << 20
	size := float64(parent[0].End - parent[0].Start)
	wantGrown := want
	wantGrown.ParentRSS += uint64(math.Round(float64(grown[0].RSS)*size/(size+1<<20))) - parent[0].RSS
	if g := MatchInherited(grown, child); g != wantGrown {
		t.Errorf("with the parent's first mapping grown by a neighbour merged in: %+v, want %+v", g, wantGrown)
	}
	// The parent split a mapping in two (mprotect, a part unmapped and
	// mapped again): the two halves cover the child's whole.
	split := append([]AnonMapping(nil), parent[:1]...)
	mid := (parent[0].Start + (parent[0].End-parent[0].Start)/2) &^ 4095
	split = append(split, parent[0])
	split[0].End, split[1].Start = mid, mid
	split[0].RSS, split[1].RSS = parent[0].RSS/2, parent[0].RSS-parent[0].RSS/2
	split = append(split, parent[1:]...)
	if g := MatchInherited(split, child); g != want {
		t.Errorf("with the parent's first mapping split in two: %+v, want %+v", g, want)
	}
	// The parent gave back the upper half of a mapping: the child's half
	// that is still covered counts, in proportion.
	shrunk := append([]AnonMapping(nil), parent...)
	shrunk[0] = split[0]
	f := float64(mid-child[0].Start) / float64(child[0].End-child[0].Start)
	g := MatchInherited(shrunk, child)
	wantCopied := want.Copied - child[0].PrivateDirty + uint64(math.Round(float64(child[0].PrivateDirty)*f))
	if g.Mappings != 13 || g.Copied != wantCopied {
		t.Errorf("with the parent's first mapping halved: %+v, want %d mappings, %d copied", g, 13, wantCopied)
	}
	// The parent unmapped it: not matched.
	gone := append([]AnonMapping(nil), parent[1:]...)
	if g := MatchInherited(gone, child); g.Mappings != 12 || g.Copied != want.Copied-child[0].PrivateDirty || g.ParentRSS != want.ParentRSS-parent[0].RSS {
		t.Errorf("with the parent's first mapping gone: %+v", g)
	}
	// One parent mapping over two of the child's (the child split its
	// copy): both matched, the parent's RSS shared between them in
	// proportion, once in all.
	one := []AnonMapping{{Start: 0x10000, End: 0x30000, RSS: 0x20000}}
	two := []AnonMapping{{Start: 0x10000, End: 0x20000, PrivateDirty: 0x4000, Shared: 0xc000}, {Start: 0x20000, End: 0x30000, PrivateDirty: 0x8000, Shared: 0x8000}}
	if g := MatchInherited(one, two); g != (Inherited{Mappings: 2, Copied: 0xc000, Shared: 0x14000, ParentRSS: 0x20000}) {
		t.Errorf("one parent mapping over two of the child's: %+v", g)
	}
	// The child's heap grew past the parent's: the part the parent covers
	// counts, in proportion.
	heap := []AnonMapping{{Start: 0x100000, End: 0x200000, PrivateDirty: 0x80000, Shared: 0x40000}}
	pheap := []AnonMapping{{Start: 0x100000, End: 0x180000, RSS: 0x80000}}
	if g := MatchInherited(pheap, heap); g != (Inherited{Mappings: 1, Copied: 0x40000, Shared: 0x20000, ParentRSS: 0x80000}) {
		t.Errorf("the child's heap grown past the parent's: %+v", g)
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
