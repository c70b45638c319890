package nsys

import (
	"github.com/gpufeed/gpufeed/internal/safetext"

	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A row of an export table is scanned into raw values and converted here,
// column by column, so that a value that does not fit the documented schema
// (text where a time is, NULL where a value is required) skips that row —
// counted, and named by table, rowid and column in one warning per table —
// instead of failing the whole file. SQLite stores whatever a writer gives
// it, whatever the declared column type.

// row is the current row of a table being read.
type row struct {
	cols  []string
	vals  []any
	rowid any
	// problem is the first value that did not convert, "" when none.
	problem string
}

// bad records the first problem of the row.
func (v *row) bad(i int, format string, args ...any) {
	if v.problem == "" {
		v.problem = fmt.Sprintf("column %s: %s", v.cols[i], fmt.Sprintf(format, args...))
	}
}

// ok reports whether every value read so far converted.
func (v *row) ok() bool { return v.problem == "" }

// int returns column i as a required integer.
func (v *row) int(i int) int64 {
	n, valid := v.nullInt(i)
	if !valid {
		v.bad(i, "expected an integer, found NULL")
	}
	return n
}

// nullInt returns column i as an integer that may be NULL (valid false).
func (v *row) nullInt(i int) (int64, bool) {
	switch x := v.vals[i].(type) {
	case nil:
		return 0, false
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
			return int64(x), true
		}
		v.bad(i, "expected an integer, found a real number (%g)", x)
	case string:
		v.bad(i, "expected an integer, found text %q", quoteShort(x))
	case []byte:
		v.bad(i, "expected an integer, found a blob of %d bytes", len(x))
	default:
		v.bad(i, "expected an integer, found %T", x)
	}
	return 0, true
}

// text returns column i as text that may be NULL (valid false); numbers are
// written out, as SQLite's own conversion does.
func (v *row) text(i int) (string, bool) {
	switch x := v.vals[i].(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case []byte:
		if utf8.Valid(x) {
			return string(x), true
		}
		v.bad(i, "expected text, found a blob of %d bytes that is not UTF-8", len(x))
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	default:
		v.bad(i, "expected text, found %T", x)
	}
	return "", true
}

// isInt is the SQL test of what row.nullInt accepts as an integer (an
// integer, or a real number with an integral value), so that totals
// computed in SQL cover the rows the loader keeps.
func isInt(col string) string {
	return fmt.Sprintf("(typeof(%[1]s) = 'integer' OR typeof(%[1]s) = 'real' AND %[1]s = CAST(%[1]s AS INTEGER))", col)
}

// validSQL is the SQL condition a row of table (under alias) meets when the
// loader keeps it: its required columns are integers and its nullable ones
// integers or NULL.
func validSQL(alias string, c tableCols) string {
	var parts []string
	for _, col := range c.required {
		parts = append(parts, isInt(alias+"."+col))
	}
	for _, col := range c.nullable {
		parts = append(parts, fmt.Sprintf("(%s IS NULL OR %s)", alias+"."+col, isInt(alias+"."+col)))
	}
	return strings.Join(parts, " AND ")
}

// tableCols are the integer columns of a table the loader needs: required
// ones, and ones that may be NULL.
type tableCols struct{ required, nullable []string }

// The integer columns of the tables the SQL totals read, as the loaders
// convert them.
var (
	runtimeInts = tableCols{required: []string{"start", "end", "nameId"}, nullable: []string{"globalTid", "correlationId"}}
	memcpyInts  = tableCols{required: []string{"start", "end", "deviceId", "streamId", "bytes", "copyKind"}, nullable: []string{"correlationId", "globalPid", "srcKind", "dstKind"}}
)

// quoteShort keeps a quoted value short in a message.
func quoteShort(s string) string { return safetext.Cap(s, 40) }

// badRows tallies the skipped rows of one table.
type badRows struct {
	n     int64
	first string // rowid and problem of the first
}

// rows reads table's columns (plain column names), rows matching where (""
// for all), and calls fn with each; fn converts the values it needs and
// adds the record only when v.ok(). Rows that do not convert are counted.
func (r *reader) rows(table string, cols []string, where string, fn func(v *row)) error {
	rowid := "rowid"
	if !r.hasRowid(table) {
		rowid = "NULL"
	}
	q := fmt.Sprintf(`SELECT %s, %s FROM "%s"`, rowid, strings.Join(cols, ", "), table)
	if where != "" {
		q += " WHERE " + where
	}
	rs, err := r.db.Query(q)
	if err != nil {
		return fmt.Errorf("reading %s: %w", table, err)
	}
	defer rs.Close()
	v := &row{cols: cols, vals: make([]any, len(cols))}
	ptrs := make([]any, len(cols)+1)
	ptrs[0] = &v.rowid
	for i := range v.vals {
		ptrs[i+1] = &v.vals[i]
	}
	for rs.Next() {
		if err := rs.Scan(ptrs...); err != nil {
			return fmt.Errorf("reading %s: %w", table, err)
		}
		v.problem = ""
		fn(v)
		if v.problem != "" {
			b := r.bad[table]
			if b == nil {
				b = &badRows{}
				r.bad[table] = b
			}
			if b.n == 0 {
				if id, ok := v.rowid.(int64); ok {
					b.first = fmt.Sprintf("rowid %d, %s", id, v.problem)
				} else {
					b.first = "a table without rowids, " + v.problem
				}
			}
			b.n++
		}
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", table, err)
	}
	return nil
}

// hasRowid reports whether table has a rowid (a WITHOUT ROWID table has not).
func (r *reader) hasRowid(table string) bool {
	st, err := r.db.Prepare(`SELECT rowid FROM "` + table + `" LIMIT 0`)
	if err != nil {
		return false
	}
	st.Close()
	return true
}

// badRowWarnings says, per table, how many rows were skipped and why the
// first one was.
func (r *reader) badRowWarnings() (warnings []string, total int64) {
	tables := make([]string, 0, len(r.bad))
	for t := range r.bad {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	for _, t := range tables {
		b := r.bad[t]
		what := fmt.Sprintf("%d rows that do not", b.n)
		if b.n == 1 {
			what = "1 row that does not"
		}
		warnings = append(warnings, fmt.Sprintf("%s: %s: skipped %s fit the schema (the first: %s)", r.path, t, what, b.first))
		total += b.n
	}
	return warnings, total
}
