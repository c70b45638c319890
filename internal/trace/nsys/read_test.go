package nsys

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/trace"
	"github.com/gpufeed/gpufeed/internal/tracegen"
)

// generated returns a Kineto trace of the scenario, decoded.
func generated(t testing.TB, sc tracegen.Pattern, steps int) *trace.Trace {
	t.Helper()
	var buf bytes.Buffer
	if _, err := tracegen.Generate(&buf, tracegen.Config{Pattern: sc, Steps: steps, Seed: 3, Rank: -1, NsResolution: true}); err != nil {
		t.Fatal(err)
	}
	tr, err := kineto.Decode(&buf, "gen.json", kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

var current = fixtureOpts{metaTable: "META_DATA_EXPORT", version: "3.16.1"}

// TestReadMatchesKineto writes the same events as a Kineto file and as an
// Nsight export: both readers must lead to the same numbers and verdict.
func TestReadMatchesKineto(t *testing.T) {
	for _, sc := range []tracegen.Pattern{tracegen.Sync, tracegen.Pageable, tracegen.DataLoader, tracegen.Mixed} {
		t.Run(string(sc), func(t *testing.T) {
			kt := generated(t, sc, 5)
			path := filepath.Join(t.TempDir(), "report.sqlite")
			writeFixture(t, path, map[int64]*trace.Trace{4242: kt}, current)
			got, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d traces, want 1", len(got))
			}
			nt := got[0]
			if err := nt.Check(); err != nil {
				t.Fatal(err)
			}
			if len(nt.Warnings) != 0 {
				t.Errorf("warnings: %q", nt.Warnings)
			}
			if nt.Counts.RuntimeCalls != kt.Counts.RuntimeCalls || nt.Counts.CPUOps != kt.Counts.CPUOps {
				t.Errorf("counts %+v, Kineto %+v", nt.Counts, kt.Counts)
			}
			nsys := tracejudge.Analyze(nt, tracejudge.Options{})
			kin := tracejudge.Analyze(kt, tracejudge.Options{IncludeLastStep: true})
			if nsys.Attribution.ByCause != kin.Attribution.ByCause || nsys.Attribution.SpanNs != kin.Attribution.SpanNs {
				t.Errorf("attribution differs:\n nsys   %+v span %d\n kineto %+v span %d", nsys.Attribution.ByCause, nsys.Attribution.SpanNs, kin.Attribution.ByCause, kin.Attribution.SpanNs)
			}
			if !reflect.DeepEqual(nsys.Idle, kin.Idle) || nsys.Temporal != kin.Temporal {
				t.Errorf("HTA numbers differ:\n nsys   %+v %+v\n kineto %+v %+v", nsys.Idle, nsys.Temporal, kin.Idle, kin.Temporal)
			}
			if nsys.Verdict.Class != kin.Verdict.Class {
				t.Errorf("verdict %s, Kineto %s", nsys.Verdict.Class, kin.Verdict.Class)
			}
			if len(nt.Meta.Devices) != 1 || nt.Meta.Devices[0].SMs != 108 || nt.Meta.SchemaVersion != "3.16.1" {
				t.Errorf("meta = %+v", nt.Meta)
			}
		})
	}
}

// TestSQLSummariesMatchEvents checks the rule totals computed in SQL against
// the same totals computed from the loaded events.
func TestSQLSummariesMatchEvents(t *testing.T) {
	for _, sc := range []tracegen.Pattern{tracegen.Sync, tracegen.Pageable, tracegen.Mixed} {
		kt := generated(t, sc, 5)
		path := filepath.Join(t.TempDir(), "report.sqlite")
		writeFixture(t, path, map[int64]*trace.Trace{4242: kt}, current)
		got, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		sqlRules := tracejudge.Analyze(got[0], tracejudge.Options{}).Rules
		if !sqlRules.FromSQL {
			t.Fatal("rules not from SQL")
		}
		plain := *got[0]
		plain.Summaries = nil
		goRules := tracejudge.Analyze(&plain, tracejudge.Options{}).Rules
		goRules.FromSQL = true
		if !reflect.DeepEqual(sqlRules, goRules) {
			t.Errorf("%s: SQL totals differ from event totals:\n sql %+v\n go  %+v", sc, sqlRules, goRules)
		}
		if sc == tracegen.Pageable && sqlRules.PageableCopies.Count == 0 {
			t.Errorf("pageable scenario: no pageable copies counted")
		}
		if sc == tracegen.Sync && sqlRules.StreamSyncs.Count == 0 {
			t.Errorf("sync scenario: no stream syncs counted")
		}
	}
}

func TestSeveralProcesses(t *testing.T) {
	a, b := generated(t, tracegen.Sync, 3), generated(t, tracegen.DataLoader, 3)
	path := filepath.Join(t.TempDir(), "two.sqlite")
	writeFixture(t, path, map[int64]*trace.Trace{100: a, 200: b}, current)
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.HasSuffix(got[0].Source, "#pid100") || !strings.HasSuffix(got[1].Source, "#pid200") {
		t.Fatalf("got %d traces (%v)", len(got), sources(got))
	}
	if work(got[0]) != work(a) || work(got[1]) != work(b) {
		t.Errorf("GPU work ops %d and %d, want %d and %d", work(got[0]), work(got[1]), work(a), work(b))
	}
}

// work counts kernels, copies and memsets (the export adds sync records).
func work(t *trace.Trace) int {
	n := 0
	for _, g := range t.GPU {
		if g.Kind.IsWork() {
			n++
		}
	}
	return n
}

func sources(ts []*trace.Trace) []string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Source)
	}
	return s
}

func TestSchemaChecks(t *testing.T) {
	small := generated(t, tracegen.Healthy, 2)
	for _, tc := range []struct {
		name   string
		opts   fixtureOpts
		table  string
		column string
		warn   string
	}{
		{name: "older meta table", opts: fixtureOpts{metaTable: "EXPORT_META_DATA", version: "2.7.1"}},
		{name: "untested version", opts: fixtureOpts{metaTable: "META_DATA_EXPORT", version: "4.0"}, warn: "version 4.0 was not tested"},
		{name: "no version", opts: fixtureOpts{}, warn: "schema version is unknown"},
		{name: "no runtime table", opts: fixtureOpts{metaTable: "META_DATA_EXPORT", version: "3.16.1",
			mutate: []string{"DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME"}}, table: "CUPTI_ACTIVITY_KIND_RUNTIME"},
		{name: "missing column", opts: fixtureOpts{metaTable: "META_DATA_EXPORT", version: "3.16.1",
			mutate: []string{"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName"}}, table: "CUPTI_ACTIVITY_KIND_KERNEL", column: "demangledName"},
		{name: "view instead of table", opts: fixtureOpts{metaTable: "META_DATA_EXPORT", version: "3.16.1",
			mutate: []string{"ALTER TABLE StringIds RENAME TO S2", "CREATE VIEW StringIds AS SELECT * FROM S2"}}, table: "StringIds"},
		{name: "no GPU tables", opts: fixtureOpts{metaTable: "META_DATA_EXPORT", version: "3.16.1",
			mutate: []string{"DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL", "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY", "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET"}}, table: "CUPTI_ACTIVITY_KIND_KERNEL (or _MEMCPY, _MEMSET)"},
		{name: "optional table unusable", opts: fixtureOpts{metaTable: "META_DATA_EXPORT", version: "3.16.1",
			mutate: []string{"ALTER TABLE ThreadNames DROP COLUMN nameId"}}, warn: `table ThreadNames has no column "nameId"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.sqlite")
			writeFixture(t, path, map[int64]*trace.Trace{1: small}, tc.opts)
			got, err := Read(path)
			if tc.table != "" {
				var se *SchemaError
				if !errors.As(err, &se) || se.Table != tc.table || se.Column != tc.column {
					t.Fatalf("err = %v; want a SchemaError naming table %s column %q", err, tc.table, tc.column)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("error %q does not name the file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := strings.Join(got[0].Warnings, "\n")
			if tc.warn == "" && w != "" || tc.warn != "" && !strings.Contains(w, tc.warn) {
				t.Errorf("warnings %q, want %q", w, tc.warn)
			}
		})
	}
}

func TestNotADatabase(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sqlite")
	writeFixture(t, good, map[int64]*trace.Trace{1: generated(t, tracegen.Healthy, 2)}, current)
	b, _ := os.ReadFile(good)
	for name, data := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("SQLite format 3\x00 and then nothing that makes sense"),
		"truncated": b[:len(b)/3],
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		if _, err := Read(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v, want an error naming the file", name, err)
		}
	}
	if _, err := Read(dir); err == nil {
		t.Errorf("a directory: no error")
	}
}

// TestReadOnly checks that reading leaves the file byte for byte unchanged.
func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.sqlite")
	writeFixture(t, path, map[int64]*trace.Trace{1: generated(t, tracegen.Healthy, 2)}, current)
	before, _ := os.ReadFile(path)
	os.Chmod(path, 0o444)
	if _, err := Read(path); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("the file changed")
	}
	if m, _ := filepath.Glob(path + "-*"); len(m) > 0 {
		t.Errorf("journal or WAL files appeared: %v", m)
	}
}
