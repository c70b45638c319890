package nsys

import (
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The tables and columns this reader uses, from NVIDIA's documented SQLite
// export schema (nsys export --type sqlite; the schema reference lists
// these in "Exported Data"). Required ones must be present; optional ones
// add detail when they are.
var (
	requiredTables = map[string][]string{
		"StringIds":                   {"id", "value"},
		"CUPTI_ACTIVITY_KIND_RUNTIME": {"start", "end", "globalTid", "correlationId", "nameId"},
	}
	// gpuTables: at least one must exist, or the report has no GPU activity.
	gpuTables = map[string][]string{
		"CUPTI_ACTIVITY_KIND_KERNEL": {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "gridX", "gridY", "gridZ"},
		"CUPTI_ACTIVITY_KIND_MEMCPY": {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind", "srcKind", "dstKind"},
		"CUPTI_ACTIVITY_KIND_MEMSET": {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "memKind"},
	}
	optionalTables = map[string][]string{
		"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": {"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "syncType"},
		"NVTX_EVENTS":                         {"start", "end", "eventType", "globalTid", "text", "textId"},
		"OSRT_API":                            {"start", "end", "globalTid", "nameId"},
		"ThreadNames":                         {"nameId", "globalTid"},
		"TARGET_INFO_GPU":                     {"id", "name", "smCount", "totalMemory"},
		"ENUM_CUDA_MEM_KIND":                  {"id", "label"},
		"ENUM_CUDA_MEMCPY_OPER":               {"id", "label"},
		"ENUM_CUPTI_SYNC_TYPE":                {"id", "label"},
		"ANALYSIS_DETAILS":                    {"startTime", "stopTime"},
	}
	// metaTables hold the export schema version: META_DATA_EXPORT in
	// current versions, EXPORT_META_DATA in older ones.
	metaTables = []string{"META_DATA_EXPORT", "EXPORT_META_DATA"}
)

// supportedMajors are the export schema major versions this reader was
// written against (2.x: Nsight Systems 2021-2022; 3.x: 2023 onwards).
var supportedMajors = map[int]bool{2: true, 3: true}

// SchemaError says what part of the expected schema a file lacks.
type SchemaError struct {
	File    string
	Table   string
	Column  string
	Version string
	// Foreign: the database has none of the export's tables at all.
	Foreign bool
}

func (e *SchemaError) Error() string {
	if e.Foreign {
		return fmt.Sprintf("%s: an SQLite database, but not an Nsight Systems export (it has none of the export's tables, such as StringIds and CUPTI_ACTIVITY_KIND_RUNTIME); export a report with nsys export --type sqlite", e.File)
	}
	v := ""
	if e.Version != "" {
		v = " (export schema " + e.Version + ")"
	}
	if e.Column != "" {
		return fmt.Sprintf("%s: table %s has no column %q%s: not an Nsight Systems SQLite export this reader understands", e.File, e.Table, e.Column, v)
	}
	return fmt.Sprintf("%s: no table %s%s: export the report with nsys export --type sqlite (with CUDA tracing on)", e.File, e.Table, v)
}

// schema is what the file holds: its tables (real tables only, never views)
// and their columns.
type schema struct {
	tables  map[string]map[string]bool
	version string
}

func (s *schema) has(table string, cols ...string) bool {
	c, ok := s.tables[table]
	if !ok {
		return false
	}
	for _, col := range cols {
		if !c[col] {
			return false
		}
	}
	return true
}

// readSchema lists the file's tables and columns. Only objects of type
// 'table' count: a view of the same name (which could run arbitrary SQL) is
// never queried.
func readSchema(db *sql.DB) (*schema, error) {
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s := &schema{tables: map[string]map[string]bool{}}
	for _, n := range names {
		if !isWanted(n) {
			continue
		}
		cols := map[string]bool{}
		r, err := db.Query(`SELECT name FROM pragma_table_info(?)`, n)
		if err != nil {
			return nil, err
		}
		for r.Next() {
			var c string
			if err := r.Scan(&c); err != nil {
				r.Close()
				return nil, err
			}
			cols[c] = true
		}
		r.Close()
		if err := r.Err(); err != nil {
			return nil, err
		}
		s.tables[n] = cols
	}
	for _, mt := range metaTables {
		if s.has(mt, "name", "value") {
			var v sql.NullString
			err := db.QueryRow(`SELECT value FROM "` + mt + `" WHERE name = 'EXPORT_SCHEMA_VERSION'`).Scan(&v)
			if err == nil && v.Valid {
				s.version = v.String
				break
			}
			if err != nil && err != sql.ErrNoRows {
				return nil, err
			}
		}
	}
	return s, nil
}

func isWanted(n string) bool {
	if _, ok := requiredTables[n]; ok {
		return true
	}
	if _, ok := gpuTables[n]; ok {
		return true
	}
	if _, ok := optionalTables[n]; ok {
		return true
	}
	for _, m := range metaTables {
		if n == m {
			return true
		}
	}
	return false
}

// check verifies the required tables and columns and returns warnings about
// the version and the optional ones.
func (s *schema) check(file string) (warnings []string, err error) {
	switch {
	case s.version == "":
		warnings = append(warnings, fmt.Sprintf("%s: no EXPORT_SCHEMA_VERSION in META_DATA_EXPORT or EXPORT_META_DATA: the export schema version is unknown", file))
	default:
		major, _, _ := strings.Cut(s.version, ".")
		m, perr := strconv.Atoi(major)
		if perr != nil || !supportedMajors[m] {
			warnings = append(warnings, fmt.Sprintf("%s: export schema version %s was not tested (tested: 2.x and 3.x); columns are checked one by one", file, s.version))
		}
	}
	if len(s.tables) == 0 {
		return warnings, &SchemaError{File: file, Table: "StringIds", Version: s.version, Foreign: true}
	}
	for _, t := range sortedKeys(requiredTables) {
		if err := s.need(file, t, requiredTables[t]); err != nil {
			return warnings, err
		}
	}
	anyGPU := false
	for _, t := range sortedKeys(gpuTables) {
		if _, ok := s.tables[t]; !ok {
			continue
		}
		anyGPU = true
		if err := s.need(file, t, gpuTables[t]); err != nil {
			return warnings, err
		}
	}
	if !anyGPU {
		return warnings, &SchemaError{File: file, Table: "CUPTI_ACTIVITY_KIND_KERNEL (or _MEMCPY, _MEMSET)", Version: s.version}
	}
	for _, t := range sortedKeys(optionalTables) {
		cols, ok := s.tables[t]
		if !ok {
			continue
		}
		for _, c := range optionalTables[t] {
			missing := !cols[c]
			if t == "NVTX_EVENTS" && (c == "text" || c == "textId") {
				missing = !cols["text"] && !cols["textId"]
			}
			if missing {
				warnings = append(warnings, fmt.Sprintf("%s: table %s has no column %q; it is not used", file, t, c))
				delete(s.tables, t)
				break
			}
		}
	}
	return warnings, nil
}

func (s *schema) need(file, table string, cols []string) error {
	have, ok := s.tables[table]
	if !ok {
		return &SchemaError{File: file, Table: table, Version: s.version}
	}
	for _, c := range cols {
		if !have[c] {
			return &SchemaError{File: file, Table: table, Column: c, Version: s.version}
		}
	}
	return nil
}

func sortedKeys(m map[string][]string) []string { return slices.Sorted(maps.Keys(m)) }
