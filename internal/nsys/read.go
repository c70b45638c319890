// Package nsys reads Nsight Systems SQLite exports (nsys export --type
// sqlite) into the trace event model, with the pure-Go SQLite driver
// modernc.org/sqlite.
//
// The file is untrusted: it is opened read-only and immutable, with
// query_only and trusted_schema off, only real tables (never views) are
// queried, and every table and column used is checked first; a file that
// does not fit gets an error naming the missing table or column. The rule
// totals (pageable copies, blocking copies and memsets, synchronisations)
// are computed in SQL, grouped by process; events are loaded for the gap
// attribution, which needs each one.
package nsys

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpufeed/gpufeed/internal/trace"

	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go, no cgo)
)

// pidOf extracts the process id from an Nsight serialized global id, in SQL
// (ids does it in Go).
const pidOf = `((%s >> 24) & 16777215)`

// Read opens the export at path and returns one trace per process that ran
// GPU work, ordered by process id.
func Read(path string) ([]*trace.Trace, error) {
	db, err := open(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	sch, err := readSchema(db)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the schema: %w", path, err)
	}
	warnings, err := sch.check(path)
	if err != nil {
		return nil, err
	}
	r := &reader{db: db, path: path, sch: sch, procs: map[int64]*proc{}}
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := r.summarize(); err != nil {
		return nil, fmt.Errorf("%s: computing rule totals: %w", path, err)
	}
	var out []*trace.Trace
	pids := make([]int64, 0, len(r.procs))
	for pid := range r.procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		p := r.procs[pid]
		if p.b.Trace().Counts.GPUOps == 0 {
			continue
		}
		t := p.b.Trace()
		t.Warnings = append(slices.Clone(warnings), t.Warnings...)
		t.Meta.SchemaVersion = sch.version
		t.Meta.Devices = r.devices
		t.Meta.ProfiledStart, t.Meta.ProfiledEnd = r.profStart, r.profEnd
		s := p.sum
		t.Summaries = &s
		out = append(out, p.b.Finish())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: the report holds no GPU operations (kernels, copies or memsets)", path)
	}
	return out, nil
}

// open opens the database read-only, immutable (no locks, no journal), with
// query_only and trusted_schema off.
func open(path string) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	u := url.URL{Scheme: "file", Path: abs}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("immutable", "1")
	q.Add("_pragma", "query_only(1)")
	q.Add("_pragma", "trusted_schema(0)")
	u.RawQuery = q.Encode()
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: not a readable SQLite database: %w", path, err)
	}
	return db, nil
}

type proc struct {
	b     *trace.Builder
	names map[int64]trace.NameID
	sum   trace.Summaries
}

type reader struct {
	db    *sql.DB
	path  string
	sch   *schema
	procs map[int64]*proc
	// strings holds the StringIds values this reader needs.
	strings map[int64]string
	// runtimeKind classifies each runtime nameId.
	runtimeKind map[int64]trace.RuntimeKind
	memKind     map[int64]trace.MemKind
	copyKind    map[int64]trace.CopyKind
	syncType    map[int64]string
	smCount     map[int64]int
	devices     []trace.Device
	profStart   int64
	profEnd     int64
	badTime     int64
	// firstBadTime names the first row dropped for its times.
	firstBadTime string
	// bad counts, per table, the rows skipped because a value did not fit.
	bad map[string]*badRows
}

func (r *reader) proc(pid int64) *proc {
	p := r.procs[pid]
	if p == nil {
		b := trace.NewBuilder(fmt.Sprintf("%s#pid%d", r.path, pid), "nsys")
		p = &proc{b: b, names: map[int64]trace.NameID{}}
		r.procs[pid] = p
	}
	return p
}

// name interns StringIds value id in p.
func (p *proc) name(r *reader, id int64) trace.NameID {
	if n, ok := p.names[id]; ok {
		return n
	}
	n := p.b.Intern(r.strings[id])
	p.names[id] = n
	return n
}

func (r *reader) load() error {
	r.bad = map[string]*badRows{}
	if err := r.loadStrings(); err != nil {
		return err
	}
	if err := r.loadEnums(); err != nil {
		return err
	}
	if err := r.loadDevices(); err != nil {
		return err
	}
	steps := []func() error{r.loadKernels, r.loadMemcpy, r.loadMemset, r.loadSync, r.loadRuntime, r.loadNVTX, r.loadOSRT, r.loadThreadNames}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	bad, skipped := r.badRowWarnings()
	for _, p := range r.procs {
		t := p.b.Trace()
		t.Counts.BadRows = skipped
		t.Warnings = append(t.Warnings, bad...)
		if r.badTime > 0 {
			t.Counts.BadTime = r.badTime
			p.b.Warnf("%s: dropped %d rows whose times no profiler records (a negative start, an end before the start or past 2^62 ns, a GPU operation more than the profiled window's length outside it; the first: %s)",
				r.path, r.badTime, r.firstBadTime)
		}
	}
	return nil
}

// loadStrings reads the StringIds values referenced by the tables used.
func (r *reader) loadStrings() error {
	var refs []string
	add := func(table, col string) {
		if r.sch.has(table, col) {
			refs = append(refs, fmt.Sprintf(`SELECT %s FROM "%s"`, col, table))
		}
	}
	add("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName")
	add("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId")
	add("NVTX_EVENTS", "textId")
	add("OSRT_API", "nameId")
	add("ThreadNames", "nameId")
	r.strings = map[int64]string{}
	err := r.rows("StringIds", []string{"id", "value"}, `id IN (`+strings.Join(refs, " UNION ")+`)`, func(v *row) {
		id := v.int(0)
		s, _ := v.text(1)
		if v.ok() {
			r.strings[id] = s
		}
	})
	if err != nil {
		return err
	}
	// Runtime names are classified once each; a nameId that is not an
	// integer is reported with its row when the calls are read.
	r.runtimeKind = map[int64]trace.RuntimeKind{}
	rows, err := r.db.Query(`SELECT DISTINCT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE typeof(nameId) = 'integer'`)
	if err != nil {
		return fmt.Errorf("reading CUPTI_ACTIVITY_KIND_RUNTIME: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("reading CUPTI_ACTIVITY_KIND_RUNTIME: %w", err)
		}
		r.runtimeKind[id] = trace.ClassifyRuntime(r.strings[id])
	}
	return rows.Err()
}

// Documented enum values, used when the report lacks the ENUM tables.
var (
	defaultMemKind  = map[int64]trace.MemKind{0: trace.Pageable, 1: trace.Pinned, 2: trace.DeviceMem, 3: trace.Array, 4: trace.Managed, 5: trace.DeviceMem, 6: trace.Managed, 7: trace.MemUnknown}
	defaultCopyKind = map[int64]trace.CopyKind{1: trace.HtoD, 2: trace.DtoH, 8: trace.DtoD, 9: trace.HtoH, 10: trace.PtoP, 11: trace.HtoD, 12: trace.DtoH, 13: trace.DtoD}
	defaultSyncType = map[int64]string{1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}
)

func (r *reader) loadEnums() error {
	r.memKind, r.copyKind, r.syncType = defaultMemKind, defaultCopyKind, defaultSyncType
	labels := func(table string) (map[int64]string, error) {
		if !r.sch.has(table, "id", "label") {
			return nil, nil
		}
		m := map[int64]string{}
		err := r.rows(table, []string{"id", "label"}, "", func(v *row) {
			id := v.int(0)
			l, _ := v.text(1)
			if v.ok() {
				m[id] = l
			}
		})
		return m, err
	}
	mk, err := labels("ENUM_CUDA_MEM_KIND")
	if err != nil {
		return err
	}
	if mk != nil {
		r.memKind = mapLabels(mk, memKindOf)
	}
	ck, err := labels("ENUM_CUDA_MEMCPY_OPER")
	if err != nil {
		return err
	}
	if ck != nil {
		r.copyKind = mapLabels(ck, copyKindOf)
	}
	st, err := labels("ENUM_CUPTI_SYNC_TYPE")
	if err != nil {
		return err
	}
	if st != nil {
		r.syncType = st
	}
	return nil
}

// mapLabels turns an enum table's labels into the kinds they name.
func mapLabels[K any](labels map[int64]string, kindOf func(label string) K) map[int64]K {
	m := make(map[int64]K, len(labels))
	for id, l := range labels {
		m[id] = kindOf(l)
	}
	return m
}

func memKindOf(label string) trace.MemKind {
	l := strings.ToLower(label)
	switch {
	case strings.HasPrefix(l, "pageable"):
		return trace.Pageable
	case strings.HasPrefix(l, "pinned"):
		return trace.Pinned
	case strings.HasPrefix(l, "device"):
		return trace.DeviceMem
	case strings.HasPrefix(l, "managed"):
		return trace.Managed
	case strings.HasPrefix(l, "array"):
		return trace.Array
	}
	return trace.MemUnknown
}

func copyKindOf(label string) trace.CopyKind {
	l := strings.ToLower(label)
	switch {
	case strings.Contains(l, "host-to-device"):
		return trace.HtoD
	case strings.Contains(l, "device-to-host"):
		return trace.DtoH
	case strings.Contains(l, "device-to-device"):
		return trace.DtoD
	case strings.Contains(l, "host-to-host"):
		return trace.HtoH
	case strings.Contains(l, "peer-to-peer"):
		return trace.PtoP
	}
	return trace.CopyUnknown
}

var memKindLabel = map[trace.MemKind]string{trace.Pageable: "Pageable", trace.Pinned: "Pinned", trace.DeviceMem: "Device",
	trace.Managed: "Managed", trace.Array: "Array", trace.MemUnknown: "Unknown", trace.HostMem: "Host"}

// copyName writes a copy the way Kineto names it, so both readers' copies
// read alike in reports.
func copyName(dir trace.CopyKind, src, dst trace.MemKind) string {
	return fmt.Sprintf("Memcpy %s (%s -> %s)", dir, memKindLabel[src], memKindLabel[dst])
}

func (r *reader) loadDevices() error {
	r.smCount = map[int64]int{}
	if r.sch.has("TARGET_INFO_GPU", "id", "name", "smCount", "totalMemory") {
		err := r.rows("TARGET_INFO_GPU", []string{"id", "name", "smCount", "totalMemory"}, "", func(v *row) {
			id := v.int(0)
			name, _ := v.text(1)
			sms, _ := v.nullInt(2)
			mem, _ := v.nullInt(3)
			if !v.ok() {
				return
			}
			r.smCount[id] = int(sms)
			r.devices = append(r.devices, trace.Device{ID: int(id), Name: name, SMs: int(sms), Bytes: mem})
		})
		if err != nil {
			return err
		}
		slices.SortStableFunc(r.devices, func(a, b trace.Device) int { return a.ID - b.ID })
	}
	if r.sch.has("ANALYSIS_DETAILS", "startTime", "stopTime") {
		err := r.rows("ANALYSIS_DETAILS", []string{"startTime", "stopTime"}, "", func(v *row) {
			a, b := v.int(0), v.int(1)
			if !v.ok() {
				return
			}
			if r.profEnd == 0 || a < r.profStart {
				r.profStart = a
			}
			r.profEnd = max(r.profEnd, b)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// impossible counts a row whose times no profiler records (see
// trace.ImpossibleTime; a GPU operation's, trace.OutsideWindow too) and
// says whether it is one.
func (r *reader) impossible(table string, v *row, start, end int64) bool {
	why := trace.ImpossibleTime(start, end)
	if why == "" && strings.HasPrefix(table, "CUPTI_ACTIVITY_KIND_") && table != "CUPTI_ACTIVITY_KIND_RUNTIME" {
		why = trace.OutsideWindow(start, end, r.profStart, r.profEnd)
	}
	if why == "" {
		return false
	}
	if r.badTime == 0 {
		r.firstBadTime = table + " " + rowName(v) + ": " + why
	}
	r.badTime++
	return true
}

// rowName names the current row of a table for a warning.
func rowName(v *row) string {
	if id, ok := v.rowid.(int64); ok {
		return fmt.Sprintf("rowid %d", id)
	}
	return "(a table without rowids)"
}

func (r *reader) gpuOp(pid int64, op trace.GPUOp, dev, stream int64) {
	p := r.proc(pid)
	op.Stream = p.b.Stream(int32(dev), stream)
	p.b.AddGPU(op)
}

// ids splits a serialized global thread (or process) id into pid and tid.
func ids(g int64) (pid, tid int64) { return (g >> 24) & 0xFFFFFF, g & 0xFFFFFF }

func (r *reader) loadKernels() error {
	if !r.sch.has("CUPTI_ACTIVITY_KIND_KERNEL") {
		return nil
	}
	cols := []string{"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "gridX", "gridY", "gridZ"}
	return r.rows("CUPTI_ACTIVITY_KIND_KERNEL", cols, "", func(v *row) {
		start, end, dev, stream := v.int(0), v.int(1), v.int(2), v.int(3)
		corr, _ := v.nullInt(4)
		gpid, _ := v.nullInt(5)
		name := v.int(6)
		gx, _ := v.nullInt(7)
		gy, _ := v.nullInt(8)
		gz, _ := v.nullInt(9)
		if !v.ok() {
			return
		}
		if r.impossible("CUPTI_ACTIVITY_KIND_KERNEL", v, start, end) {
			return
		}
		pid, _ := ids(gpid)
		p := r.proc(pid)
		op := trace.GPUOp{Start: start, End: end, Corr: corr, Name: p.name(r, name), Kind: trace.Kernel}
		if sms := r.smCount[dev]; sms > 0 {
			if blocks := float64(gx) * float64(gy) * float64(gz); blocks > 0 {
				op.BlocksPerSM = float32(blocks / float64(sms))
			}
		}
		r.gpuOp(pid, op, dev, stream)
	})
}

func (r *reader) loadMemcpy() error {
	if !r.sch.has("CUPTI_ACTIVITY_KIND_MEMCPY") {
		return nil
	}
	cols := []string{"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "copyKind", "srcKind", "dstKind"}
	return r.rows("CUPTI_ACTIVITY_KIND_MEMCPY", cols, "", func(v *row) {
		start, end, dev, stream := v.int(0), v.int(1), v.int(2), v.int(3)
		corr, _ := v.nullInt(4)
		gpid, _ := v.nullInt(5)
		bytes, ck := v.int(6), v.int(7)
		src, srcOK := v.nullInt(8)
		dst, dstOK := v.nullInt(9)
		if !v.ok() {
			return
		}
		if r.impossible("CUPTI_ACTIVITY_KIND_MEMCPY", v, start, end) {
			return
		}
		dir := r.copyKind[ck]
		sk, dk := trace.MemUnknown, trace.MemUnknown
		if srcOK {
			sk = r.memKind[src]
		}
		if dstOK {
			dk = r.memKind[dst]
		}
		pid, _ := ids(gpid)
		p := r.proc(pid)
		op := trace.GPUOp{Start: start, End: end, Corr: corr, Bytes: bytes, Kind: trace.Memcpy, Copy: dir, Src: sk, Dst: dk,
			Name: p.b.Intern(copyName(dir, sk, dk))}
		r.gpuOp(pid, op, dev, stream)
	})
}

func (r *reader) loadMemset() error {
	if !r.sch.has("CUPTI_ACTIVITY_KIND_MEMSET") {
		return nil
	}
	cols := []string{"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes", "memKind"}
	return r.rows("CUPTI_ACTIVITY_KIND_MEMSET", cols, "", func(v *row) {
		start, end, dev, stream := v.int(0), v.int(1), v.int(2), v.int(3)
		corr, _ := v.nullInt(4)
		gpid, _ := v.nullInt(5)
		bytes := v.int(6)
		mk, mkOK := v.nullInt(7)
		if !v.ok() {
			return
		}
		if r.impossible("CUPTI_ACTIVITY_KIND_MEMSET", v, start, end) {
			return
		}
		k := trace.MemUnknown
		if mkOK {
			k = r.memKind[mk]
		}
		pid, _ := ids(gpid)
		p := r.proc(pid)
		op := trace.GPUOp{Start: start, End: end, Corr: corr, Bytes: bytes, Kind: trace.Memset, Dst: k,
			Name: p.b.Intern(fmt.Sprintf("Memset (%s)", memKindLabel[k]))}
		r.gpuOp(pid, op, dev, stream)
	})
}

func (r *reader) loadSync() error {
	if !r.sch.has("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") {
		return nil
	}
	cols := []string{"start", "end", "deviceId", "streamId", "correlationId", "globalPid", "syncType"}
	return r.rows("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", cols, "", func(v *row) {
		start, end, dev, stream := v.int(0), v.int(1), v.int(2), v.int(3)
		corr, _ := v.nullInt(4)
		gpid, _ := v.nullInt(5)
		st := v.int(6)
		if !v.ok() {
			return
		}
		if r.impossible("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", v, start, end) {
			return
		}
		name := r.syncType[st]
		if name == "" {
			name = "Synchronization"
		}
		pid, _ := ids(gpid)
		p := r.proc(pid)
		op := trace.GPUOp{Start: start, End: end, Corr: corr, Kind: trace.GPUSync, Name: p.b.Intern(name)}
		r.gpuOp(pid, op, dev, stream)
	})
}

func (r *reader) loadRuntime() error {
	cols := []string{"start", "end", "globalTid", "correlationId", "nameId"}
	return r.rows("CUPTI_ACTIVITY_KIND_RUNTIME", cols, "", func(v *row) {
		start, end := v.int(0), v.int(1)
		gtid, _ := v.nullInt(2)
		corr, _ := v.nullInt(3)
		name := v.int(4)
		if !v.ok() {
			return
		}
		if r.impossible("CUPTI_ACTIVITY_KIND_RUNTIME", v, start, end) {
			return
		}
		pid, tid := ids(gtid)
		p := r.proc(pid)
		p.b.AddRuntime(trace.RuntimeCall{Start: start, End: end, Corr: corr, Name: p.name(r, name),
			Thread: p.b.Thread(pid, tid), Kind: r.runtimeKind[name]})
	})
}

// NVTX event types for ranges (ENUM_NSYS_EVENT_TYPE): push/pop and start/end.
const (
	nvtxPushPop  = 59
	nvtxStartEnd = 60
)

func (r *reader) loadNVTX() error {
	if !r.sch.has("NVTX_EVENTS") {
		return nil
	}
	text, textID := "NULL", "NULL"
	if r.sch.has("NVTX_EVENTS", "text") {
		text = "text"
	}
	if r.sch.has("NVTX_EVENTS", "textId") {
		textID = "textId"
	}
	cols := []string{"start", "end", "globalTid", text, textID}
	where := fmt.Sprintf("eventType IN (%d, %d) AND end IS NOT NULL", nvtxPushPop, nvtxStartEnd)
	return r.rows("NVTX_EVENTS", cols, where, func(v *row) {
		start, end := v.int(0), v.int(1)
		gtid, _ := v.nullInt(2)
		txt, txtOK := v.text(3)
		tid, tidOK := v.nullInt(4)
		if !v.ok() {
			return
		}
		if r.impossible("NVTX_EVENTS", v, start, end) {
			return
		}
		s := txt
		if !txtOK && tidOK {
			s = r.strings[tid]
		}
		pid, th := ids(gtid)
		p := r.proc(pid)
		p.b.AddCPU(trace.CPUOp{Start: start, End: end, Name: p.b.Intern(s), Thread: p.b.Thread(pid, th),
			Kind: trace.ClassifyCPU(s, trace.Annotation)})
	})
}

func (r *reader) loadOSRT() error {
	if !r.sch.has("OSRT_API") {
		return nil
	}
	return r.rows("OSRT_API", []string{"start", "end", "globalTid", "nameId"}, "", func(v *row) {
		start, end := v.int(0), v.int(1)
		gtid, _ := v.nullInt(2)
		name := v.int(3)
		if !v.ok() {
			return
		}
		if r.impossible("OSRT_API", v, start, end) {
			return
		}
		pid, th := ids(gtid)
		p := r.proc(pid)
		p.b.AddCPU(trace.CPUOp{Start: start, End: end, Name: p.name(r, name), Thread: p.b.Thread(pid, th), Kind: trace.Operator})
	})
}

func (r *reader) loadThreadNames() error {
	if !r.sch.has("ThreadNames") {
		return nil
	}
	return r.rows("ThreadNames", []string{"globalTid", "nameId"}, "", func(v *row) {
		gtid, _ := v.nullInt(0)
		name, _ := v.nullInt(1)
		if !v.ok() {
			return
		}
		pid, th := ids(gtid)
		if p := r.procs[pid]; p != nil {
			p.b.SetThreadName(p.b.Thread(pid, th), r.strings[name])
		}
	})
}
