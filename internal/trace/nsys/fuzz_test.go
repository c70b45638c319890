package nsys

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/trace"
	"github.com/gpufeed/gpufeed/internal/tracegen"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seed corpus")

// seedDB builds a small export (512-byte pages, one short step).
func seedDB(t testing.TB, o fixtureOpts) []byte {
	o.pageSize = 512
	path := filepath.Join(t.TempDir(), "seed.sqlite")
	writeFixture(t, path, map[int64]*trace.Trace{7: generated(t, tracegen.Healthy, 1)}, o)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteFuzzSeeds rewrites testdata/fuzz/FuzzRead with -update-seeds.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*updateSeeds {
		t.Skip("run with -update-seeds to rewrite the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	os.MkdirAll(dir, 0o755)
	for name, o := range map[string]fixtureOpts{
		"export_3_16": current,
		"export_2_7":  {metaTable: "EXPORT_META_DATA", version: "2.7.1"},
	} {
		b := seedDB(t, o)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzRead writes arbitrary bytes as a database file and reads it: the
// reader must never panic, any trace it returns must pass trace.Check and
// hold no GPU operation at an impossible time, and judging it must not
// panic.
// The seed corpus (testdata/fuzz/FuzzRead) holds small valid exports; CI
// runs the seeds only.
func FuzzRead(f *testing.F) {
	f.Add([]byte("SQLite format 3\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.sqlite")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		traces, err := Read(path)
		if err != nil {
			return
		}
		for _, tr := range traces {
			if err := tr.Check(); err != nil {
				t.Fatal(err)
			}
			for _, g := range tr.GPU {
				if trace.ImpossibleTime(g.Start, g.End) != "" || trace.OutsideWindow(g.Start, g.End, tr.Meta.ProfiledStart, tr.Meta.ProfiledEnd) != "" {
					t.Fatalf("kept a GPU operation at [%d, %d] in the window [%d, %d]", g.Start, g.End, tr.Meta.ProfiledStart, tr.Meta.ProfiledEnd)
				}
			}
			// What gpufeed trace does next must not panic either (a
			// negative start did, in the low-use windows).
			tracejudge.Analyze(tr, tracejudge.Options{})
		}
	})
}
