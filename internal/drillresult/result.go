// Package drillresult is what a drill measured, as tables: this machine's
// numbers beside the published reference numbers, in the units the
// renderers print (internal/render writes a Report as text or JSON). It is
// plain data: the drills fill it (internal/drill), nothing here measures.
package drillresult

// Unit is a column's unit: it is the suffix of the column's JSON key.
type Unit string

// The units a drill column may have.
const (
	Nanoseconds Unit = "ns"
	Percent     Unit = "percent"
	Bytes       Unit = "bytes"
	BytesPerSec Unit = "bytes_per_sec"
	Count       Unit = "count"
)

// Report is one drill's run.
type Report struct {
	// Drill is the drill's name (jitter, cow, copy, syscalls); Title says
	// what it runs.
	Drill, Title string
	// Backend says what ran the GPU side: the CUDA driver library and the
	// device ("" for a drill with no GPU side).
	Backend string
	// Machine describes this host: CPU model, CPU count and threads per
	// core, kernel.
	Machine string
	// ReferenceFrom says where the reference numbers were measured ("" when
	// the drill has none).
	ReferenceFrom string
	Tables        []Table
	// Notes say what was run instead of what could not be, and how to read
	// the numbers.
	Notes []string
}

// Table is one table of a report.
type Table struct {
	// ID is the table's key in JSON (snake_case).
	ID, Title string
	Columns   []Column
	Rows      []Row
	// Detail tables (a series over time) are printed by the text renderer
	// only when verbose; JSON always has them.
	Detail bool
}

// Column is one measured quantity.
type Column struct {
	// Key is the JSON key: snake_case ending with the unit's suffix.
	Key, Label string
	Unit       Unit
}

// Value is one cell: a value, and the range it spanned over repetitions
// (Min, Max) where it was repeated. A nil Value is not measured.
type Value struct {
	Value    float64
	Min, Max *float64
}

// Row is one experiment of a table: what this machine measured and the
// reference, one cell per column (a nil cell: not measured, or no
// reference for it).
type Row struct {
	Key, Label string
	Measured   []*Value
	Reference  []*Value
	// Note qualifies the row (what was run instead).
	Note string
	// Skipped says why the row was not run (Measured is then all nil).
	Skipped string
}

// V is a cell with one value.
func V(v float64) *Value { return &Value{Value: v} }

// R is a cell with a typical value and the range it spanned.
func R(v, lo, hi float64) *Value { return &Value{Value: v, Min: &lo, Max: &hi} }
