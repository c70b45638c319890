package nsys

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/trace"
	"github.com/gpufeed/gpufeed/internal/trace/tracegen"
)

// TestBadRowsSkipped: a row whose values do not fit the schema (text where
// a time is, a NULL where a value is required) is skipped and counted, and a
// warning names the table, the row id and the column; the rest of the file
// is read. One such row used to fail the whole file with a bare
// "sql: Scan error".
func TestBadRowsSkipped(t *testing.T) {
	small := generated(t, tracegen.Mixed, 2)
	clean := filepath.Join(t.TempDir(), "clean.sqlite")
	writeFixture(t, clean, map[int64]*trace.Trace{1: small}, current)
	want, err := Read(clean)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r.sqlite")
	opts := current
	opts.pageSize = 512 // small: the file is also a fuzz seed
	opts.mutate = []string{
		`UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'garbage' WHERE rowid = 3`,
		`UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 1.5e400 WHERE rowid = 5`,
		`UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET nameId = x'00ff' WHERE rowid = 2`,
		`UPDATE NVTX_EVENTS SET globalTid = 'main' WHERE rowid = 1`,
		// A blocking call and a copy whose values the totals in SQL must
		// leave out as the loader does.
		`UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 'x' WHERE rowid = (SELECT min(r.rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaStreamSynchronize%')`,
		`UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = 'many' WHERE rowid = 1`,
	}
	writeFixture(t, path, map[int64]*trace.Trace{1: small}, opts)
	got, err := Read(path)
	if err != nil {
		t.Fatalf("one bad row must not fail the file: %v", err)
	}
	tr := got[0]
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
	if n, w := tr.Counts.GPUOps, want[0].Counts.GPUOps; n != w-3 {
		t.Errorf("GPU ops %d, want %d (two bad kernel rows and a copy skipped)", n, w-3)
	}
	if n, w := tr.Counts.RuntimeCalls, want[0].Counts.RuntimeCalls; n != w-2 {
		t.Errorf("runtime calls %d, want %d", n, w-2)
	}
	if n, w := tr.Counts.CPUOps, want[0].Counts.CPUOps; n != w-1 {
		t.Errorf("CPU ranges %d, want %d", n, w-1)
	}
	if tr.Counts.BadRows != 6 {
		t.Errorf("bad rows %d, want 6", tr.Counts.BadRows)
	}
	// The totals computed in SQL leave the same rows out.
	sqlRules := tracejudge.Analyze(tr, tracejudge.Options{}).Rules
	plain := *tr
	plain.Summaries = nil
	goRules := tracejudge.Analyze(&plain, tracejudge.Options{}).Rules
	goRules.FromSQL = true
	if !reflect.DeepEqual(sqlRules, goRules) {
		t.Errorf("SQL totals differ from event totals:\n sql %+v\n go  %+v", sqlRules, goRules)
	}
	warn := strings.Join(tr.Warnings, "\n")
	for _, w := range []string{
		path + ": CUPTI_ACTIVITY_KIND_KERNEL: skipped 2 rows that do not fit the schema (the first: rowid 3, column start: expected an integer, found text \"garbage\")",
		"CUPTI_ACTIVITY_KIND_RUNTIME: skipped 2 rows that do not fit the schema (the first: rowid 2, column nameId: expected an integer, found a blob",
		"NVTX_EVENTS: skipped 1 row that does not fit the schema (the first: rowid 1, column globalTid: expected an integer, found text \"main\")",
	} {
		if !strings.Contains(warn, w) {
			t.Errorf("warnings\n%s\nwant %q", warn, w)
		}
	}
	if strings.Contains(warn, "sql:") {
		t.Errorf("raw database/sql text in the warnings: %s", warn)
	}
	// The fuzzer keeps this file as a seed.
	if *updateSeeds {
		b, _ := os.ReadFile(path)
		os.WriteFile(filepath.Join("testdata", "fuzz", "FuzzRead", "bad_rows"), []byte("go test fuzz v1\n[]byte("+strconv.Quote(string(b))+")\n"), 0o644)
	}
}
