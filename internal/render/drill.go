package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpufeed/gpufeed/internal/drillresult"
)

// DrillReport is what gpufeed drill writes: one drill's tables, this
// machine's numbers beside the reference numbers.
type DrillReport struct {
	Header Header
	drillresult.Report
}

func (*DrillReport) document() {}

// drillRenderer is a format that can write a drill; a format without it
// says so rather than writing something else.
type drillRenderer interface {
	Drill(w io.Writer, r *DrillReport, o Options) error
}

func writeDrill(w io.Writer, f Format, r Renderer, d *DrillReport, o Options) error {
	dr, ok := r.(drillRenderer)
	if !ok {
		return fmt.Errorf("output format %q cannot write a drill's tables: use text or json", f)
	}
	return dr.Drill(w, d, o)
}

// cell writes one value in its column's unit.
func cell(v float64, u drillresult.Unit) string {
	switch u {
	case drillresult.Nanoseconds:
		return Duration(time.Duration(v))
	case drillresult.Percent:
		return Number(float64(int64(v+0.5))) + " %"
	case drillresult.Bytes:
		return Bytes(v)
	case drillresult.BytesPerSec:
		return Number(sig3(v/1e9)) + " GB/s"
	}
	return Number(v)
}

// span writes a range, its unit once when both ends share it: "1.67-1.77 ms".
func span(lo, hi float64, u drillresult.Unit) string {
	a, b := cell(lo, u), cell(hi, u)
	if a == b {
		return a
	}
	ia, ib := strings.LastIndexByte(a, ' '), strings.LastIndexByte(b, ' ')
	if ia > 0 && ib > 0 && a[ia:] == b[ib:] {
		return a[:ia] + "-" + b
	}
	return a + "-" + b
}

func measuredCell(v *drillresult.Value, u drillresult.Unit) string {
	if v == nil {
		return "-"
	}
	s := cell(v.Value, u)
	if v.Min != nil && v.Max != nil && cell(*v.Min, u) != cell(*v.Max, u) {
		s += " [" + span(*v.Min, *v.Max, u) + "]"
	}
	return s
}

func referenceCell(v *drillresult.Value, u drillresult.Unit) string {
	if v == nil {
		return "-"
	}
	if v.Min != nil && v.Max != nil {
		return span(*v.Min, *v.Max, u)
	}
	return cell(v.Value, u)
}

func (textRenderer) Drill(w io.Writer, r *DrillReport, o Options) error {
	t := &textOut{}
	width := o.width()
	for _, l := range wrap("gpufeed drill "+r.Drill+": "+r.Title, width, "", "  ", 0) {
		t.line("%s", l)
	}
	t.line("%s", clip("machine: "+r.Machine, width))
	if r.Backend != "" {
		for _, l := range wrap("GPU side: "+r.Backend, width, "", "  ", 0) {
			t.line("%s", l)
		}
	}
	for _, tab := range r.Tables {
		if tab.Detail && !o.Verbose {
			continue
		}
		t.line("")
		t.line("%s", clip(tab.Title, width))
		// Reference columns only where a row has a reference.
		var refCols []int
		for i := range tab.Columns {
			for _, row := range tab.Rows {
				if i < len(row.Reference) && row.Reference[i] != nil {
					refCols = append(refCols, i)
					break
				}
			}
		}
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		head := []string{""}
		if len(refCols) > 0 {
			head[0] = ""
			top := []string{""}
			for i := range tab.Columns {
				if i == 0 {
					top = append(top, "this machine")
				} else {
					top = append(top, "")
				}
			}
			for i := range refCols {
				if i == 0 {
					top = append(top, "reference")
				} else {
					top = append(top, "")
				}
			}
			tabRow(tw, top)
		}
		for _, c := range tab.Columns {
			head = append(head, c.Label)
		}
		for _, i := range refCols {
			head = append(head, tab.Columns[i].Label)
		}
		tabRow(tw, head)
		for _, row := range tab.Rows {
			cells := []string{row.Label}
			if row.Skipped != "" {
				cells = append(cells, "not run: "+row.Skipped)
				tabRow(tw, cells)
				continue
			}
			for i, c := range tab.Columns {
				var v *drillresult.Value
				if i < len(row.Measured) {
					v = row.Measured[i]
				}
				cells = append(cells, measuredCell(v, c.Unit))
			}
			for _, i := range refCols {
				var v *drillresult.Value
				if i < len(row.Reference) {
					v = row.Reference[i]
				}
				cells = append(cells, referenceCell(v, tab.Columns[i].Unit))
			}
			tabRow(tw, cells)
		}
		tw.Flush()
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			t.line("%s", strings.TrimRight(l, " "))
		}
		if len(refCols) > 0 && r.ReferenceFrom != "" {
			t.line("%s", clip("reference: "+r.ReferenceFrom, width))
		}
	}
	if len(r.Notes) > 0 {
		t.line("")
		for _, n := range r.Notes {
			for _, l := range wrap(n, width, "- ", "  ", 0) {
				t.line("%s", l)
			}
		}
	}
	if !o.Verbose {
		for _, tab := range r.Tables {
			if tab.Detail {
				t.line("")
				t.line("-v: the series over time")
				break
			}
		}
	}
	return t.flush(w)
}

// tabRow writes one row of cells, each cleaned, separated by tabs for the
// tabwriter.
func tabRow(w io.Writer, cells []string) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		rowf(w, "%s", c)
	}
	io.WriteString(w, "\n")
}

// The drill's JSON view: each row's cells as keys named by their column
// (wall_ns, and wall_min_ns and wall_max_ns for its range).
type jsonDrill struct {
	Header
	Drill         string           `json:"drill"`
	Title         string           `json:"title"`
	Backend       *string          `json:"backend"`
	Machine       string           `json:"machine"`
	ReferenceFrom *string          `json:"reference_from"`
	Tables        []jsonDrillTable `json:"tables"`
	Notes         []string         `json:"notes"`
}

type jsonDrillTable struct {
	ID      string            `json:"id"`
	Title   string            `json:"title"`
	Detail  bool              `json:"detail"`
	Columns []jsonDrillColumn `json:"columns"`
	Rows    []jsonDrillRow    `json:"rows"`
}

type jsonDrillColumn struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	Unit  string `json:"unit"`
}

type jsonDrillRow struct {
	Key       string         `json:"key"`
	Label     string         `json:"label"`
	Measured  map[string]any `json:"measured"`
	Reference map[string]any `json:"reference"`
	Note      *string        `json:"note"`
	Skipped   *string        `json:"skipped"`
}

// rangeKey is the key of a column's range end: wall_ns's minimum is
// wall_min_ns.
func rangeKey(key string, u drillresult.Unit, end string) string {
	base := strings.TrimSuffix(key, "_"+string(u))
	return base + "_" + end + "_" + string(u)
}

func drillCells(cols []drillresult.Column, vals []*drillresult.Value, withRange bool) map[string]any {
	m := map[string]any{}
	seen := false
	for i, c := range cols {
		var v *drillresult.Value
		if i < len(vals) {
			v = vals[i]
		}
		if v == nil {
			m[c.Key] = nil
			if withRange {
				m[rangeKey(c.Key, c.Unit, "min")], m[rangeKey(c.Key, c.Unit, "max")] = nil, nil
			}
			continue
		}
		seen = true
		m[c.Key] = v.Value
		if withRange {
			m[rangeKey(c.Key, c.Unit, "min")], m[rangeKey(c.Key, c.Unit, "max")] = nil, nil
			if v.Min != nil && v.Max != nil {
				m[rangeKey(c.Key, c.Unit, "min")], m[rangeKey(c.Key, c.Unit, "max")] = *v.Min, *v.Max
			}
		}
	}
	if !seen && !withRange {
		return nil
	}
	return m
}

func (jsonRenderer) Drill(w io.Writer, r *DrillReport, _ Options) error {
	d := jsonDrill{Header: header(r.Header), Drill: r.Drill, Title: r.Title, Backend: optString(r.Backend), Machine: r.Machine,
		ReferenceFrom: optString(r.ReferenceFrom), Tables: []jsonDrillTable{}, Notes: append([]string{}, r.Notes...)}
	for _, t := range r.Tables {
		jt := jsonDrillTable{ID: t.ID, Title: t.Title, Detail: t.Detail, Columns: []jsonDrillColumn{}, Rows: []jsonDrillRow{}}
		for _, c := range t.Columns {
			jt.Columns = append(jt.Columns, jsonDrillColumn{Key: c.Key, Label: c.Label, Unit: string(c.Unit)})
		}
		for _, row := range t.Rows {
			jr := jsonDrillRow{Key: row.Key, Label: row.Label, Note: optString(row.Note), Skipped: optString(row.Skipped),
				Measured: drillCells(t.Columns, row.Measured, true), Reference: drillCells(t.Columns, row.Reference, true)}
			hasRef := false
			for _, v := range row.Reference {
				hasRef = hasRef || v != nil
			}
			if !hasRef {
				jr.Reference = nil
			}
			if row.Skipped != "" {
				jr.Measured = nil
			}
			jt.Rows = append(jt.Rows, jr)
		}
		d.Tables = append(d.Tables, jt)
	}
	return writeJSON(w, d)
}
