package nsys

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/trace"
	"github.com/gpufeed/gpufeed/internal/tracegen"
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

// TestImpossibleTimesDropped: kernel and copy rows whose times no profiler
// records (a negative start, an end of INT64_MAX, a kernel ending hours
// after a window of milliseconds) are dropped and counted, with one
// warning saying how many, why and which row first; the rest is judged.
// A negative start made the low-use windows index out of range (a panic
// of gpufeed trace), an end of INT64_MAX made the span 9.2e18 ns.
func TestImpossibleTimesDropped(t *testing.T) {
	small := generated(t, tracegen.Mixed, 2)
	clean := filepath.Join(t.TempDir(), "clean.sqlite")
	writeFixture(t, clean, map[int64]*trace.Trace{1: small}, current)
	want, err := Read(clean)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "times.sqlite")
	opts := current
	opts.pageSize = 512 // small: the file is also a fuzz seed
	opts.mutate = []string{
		`UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -1000000000 WHERE rowid = 2`,
		`UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET start = -5 WHERE rowid = 1`,
		`UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE rowid = 4`,
		`UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + 9000000000000 WHERE rowid = 6`,
		`UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = -7 WHERE rowid = 3`,
	}
	writeFixture(t, path, map[int64]*trace.Trace{1: small}, opts)
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := got[0]
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
	if n, w := tr.Counts.GPUOps, want[0].Counts.GPUOps; n != w-4 {
		t.Errorf("GPU ops %d, want %d (three kernels and a copy dropped)", n, w-4)
	}
	if n, w := tr.Counts.RuntimeCalls, want[0].Counts.RuntimeCalls; n != w-1 {
		t.Errorf("runtime calls %d, want %d", n, w-1)
	}
	if tr.Counts.BadTime != 5 {
		t.Errorf("bad times %d, want 5", tr.Counts.BadTime)
	}
	for _, g := range tr.GPU {
		if g.Start < 0 || g.Dur() > int64(time.Hour) {
			t.Errorf("kept a GPU op at %d lasting %d ns", g.Start, g.Dur())
		}
	}
	warn := strings.Join(tr.Warnings, "\n")
	if !strings.Contains(warn, path+": dropped 5 rows whose times no profiler records") ||
		!strings.Contains(warn, "the first: CUPTI_ACTIVITY_KIND_KERNEL rowid 2: negative start -1000000000") {
		t.Errorf("warnings\n%s\nwant one naming the count, the reasons and the first row", warn)
	}
	// Judged: the low-use windows, the gaps and the totals in SQL leave
	// the same rows out as the loader.
	sqlRules := tracejudge.Analyze(tr, tracejudge.Options{}).Rules
	plain := *tr
	plain.Summaries = nil
	goRules := tracejudge.Analyze(&plain, tracejudge.Options{}).Rules
	goRules.FromSQL = true
	if !reflect.DeepEqual(sqlRules, goRules) {
		t.Errorf("SQL totals differ from event totals:\n sql %+v\n go  %+v", sqlRules, goRules)
	}
	if *updateSeeds {
		b, _ := os.ReadFile(path)
		os.WriteFile(filepath.Join("testdata", "fuzz", "FuzzRead", "impossible_times"), []byte("go test fuzz v1\n[]byte("+strconv.Quote(string(b))+")\n"), 0o644)
	}
}
