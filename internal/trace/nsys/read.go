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

// pidOf extracts the process id from an Nsight serialized global id.
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
	if r.badTime > 0 {
		for _, p := range r.procs {
			p.b.Warnf("%s: dropped %d events whose end precedes their start", r.path, r.badTime)
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
	rows, err := r.db.Query(`SELECT id, value FROM StringIds WHERE id IN (` + strings.Join(refs, " UNION ") + `)`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var v sql.NullString
		if err := rows.Scan(&id, &v); err != nil {
			return err
		}
		r.strings[id] = v.String
	}
	if err := rows.Err(); err != nil {
		return err
	}
	r.runtimeKind = map[int64]trace.RuntimeKind{}
	rows2, err := r.db.Query(`SELECT DISTINCT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME`)
	if err != nil {
		return err
	}
	defer rows2.Close()
	for rows2.Next() {
		var id int64
		if err := rows2.Scan(&id); err != nil {
			return err
		}
		r.runtimeKind[id] = trace.ClassifyRuntime(r.strings[id])
	}
	return rows2.Err()
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
		rows, err := r.db.Query(`SELECT id, label FROM "` + table + `"`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		m := map[int64]string{}
		for rows.Next() {
			var id int64
			var l sql.NullString
			if err := rows.Scan(&id, &l); err != nil {
				return nil, err
			}
			m[id] = l.String
		}
		return m, rows.Err()
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
		rows, err := r.db.Query(`SELECT id, name, smCount, totalMemory FROM TARGET_INFO_GPU ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var name sql.NullString
			var sms, mem sql.NullInt64
			if err := rows.Scan(&id, &name, &sms, &mem); err != nil {
				return err
			}
			r.smCount[id] = int(sms.Int64)
			r.devices = append(r.devices, trace.Device{ID: int(id), Name: name.String, SMs: int(sms.Int64), Bytes: mem.Int64})
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	if r.sch.has("ANALYSIS_DETAILS", "startTime", "stopTime") {
		var a, b sql.NullInt64
		err := r.db.QueryRow(`SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS`).Scan(&a, &b)
		if err != nil && err != sql.ErrNoRows {
			return err
		}
		r.profStart, r.profEnd = a.Int64, b.Int64
	}
	return nil
}

// rowsOf runs q and calls fn with each row's scan function.
func (r *reader) rowsOf(q string, fn func(scan func(...any) error) error) error {
	rows, err := r.db.Query(q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (r *reader) gpuOp(pid int64, op trace.GPUOp, dev, stream int64) {
	if op.End < op.Start {
		r.badTime++
		return
	}
	p := r.proc(pid)
	op.Stream = p.b.Stream(int32(dev), stream)
	p.b.AddGPU(op)
}

func (r *reader) loadKernels() error {
	if !r.sch.has("CUPTI_ACTIVITY_KIND_KERNEL") {
		return nil
	}
	q := fmt.Sprintf(`SELECT start, end, deviceId, streamId, correlationId, %s, demangledName, gridX * gridY * gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL`, fmt.Sprintf(pidOf, "globalPid"))
	return r.rowsOf(q, func(scan func(...any) error) error {
		var start, end, dev, stream, name int64
		var corr, pid, blocks sql.NullInt64
		if err := scan(&start, &end, &dev, &stream, &corr, &pid, &name, &blocks); err != nil {
			return err
		}
		p := r.proc(pid.Int64)
		op := trace.GPUOp{Start: start, End: end, Corr: corr.Int64, Name: p.name(r, name), Kind: trace.Kernel}
		if sms := r.smCount[dev]; sms > 0 && blocks.Int64 > 0 {
			op.BlocksPerSM = float32(blocks.Int64) / float32(sms)
		}
		r.gpuOp(pid.Int64, op, dev, stream)
		return nil
	})
}

func (r *reader) loadMemcpy() error {
	if !r.sch.has("CUPTI_ACTIVITY_KIND_MEMCPY") {
		return nil
	}
	q := fmt.Sprintf(`SELECT start, end, deviceId, streamId, correlationId, %s, bytes, copyKind, srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY`, fmt.Sprintf(pidOf, "globalPid"))
	return r.rowsOf(q, func(scan func(...any) error) error {
		var start, end, dev, stream, bytes, ck int64
		var corr, pid, src, dst sql.NullInt64
		if err := scan(&start, &end, &dev, &stream, &corr, &pid, &bytes, &ck, &src, &dst); err != nil {
			return err
		}
		dir := r.copyKind[ck]
		sk, dk := trace.MemUnknown, trace.MemUnknown
		if src.Valid {
			sk = r.memKind[src.Int64]
		}
		if dst.Valid {
			dk = r.memKind[dst.Int64]
		}
		p := r.proc(pid.Int64)
		op := trace.GPUOp{Start: start, End: end, Corr: corr.Int64, Bytes: bytes, Kind: trace.Memcpy, Copy: dir, Src: sk, Dst: dk,
			Name: p.b.Intern(copyName(dir, sk, dk))}
		r.gpuOp(pid.Int64, op, dev, stream)
		return nil
	})
}

func (r *reader) loadMemset() error {
	if !r.sch.has("CUPTI_ACTIVITY_KIND_MEMSET") {
		return nil
	}
	q := fmt.Sprintf(`SELECT start, end, deviceId, streamId, correlationId, %s, bytes, memKind FROM CUPTI_ACTIVITY_KIND_MEMSET`, fmt.Sprintf(pidOf, "globalPid"))
	return r.rowsOf(q, func(scan func(...any) error) error {
		var start, end, dev, stream, bytes int64
		var corr, pid, mk sql.NullInt64
		if err := scan(&start, &end, &dev, &stream, &corr, &pid, &bytes, &mk); err != nil {
			return err
		}
		k := trace.MemUnknown
		if mk.Valid {
			k = r.memKind[mk.Int64]
		}
		p := r.proc(pid.Int64)
		op := trace.GPUOp{Start: start, End: end, Corr: corr.Int64, Bytes: bytes, Kind: trace.Memset, Dst: k,
			Name: p.b.Intern(fmt.Sprintf("Memset (%s)", memKindLabel[k]))}
		r.gpuOp(pid.Int64, op, dev, stream)
		return nil
	})
}

func (r *reader) loadSync() error {
	if !r.sch.has("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") {
		return nil
	}
	q := fmt.Sprintf(`SELECT start, end, deviceId, streamId, correlationId, %s, syncType FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`, fmt.Sprintf(pidOf, "globalPid"))
	return r.rowsOf(q, func(scan func(...any) error) error {
		var start, end, dev, stream, st int64
		var corr, pid sql.NullInt64
		if err := scan(&start, &end, &dev, &stream, &corr, &pid, &st); err != nil {
			return err
		}
		name := r.syncType[st]
		if name == "" {
			name = "Synchronization"
		}
		p := r.proc(pid.Int64)
		op := trace.GPUOp{Start: start, End: end, Corr: corr.Int64, Kind: trace.GPUSync, Name: p.b.Intern(name)}
		r.gpuOp(pid.Int64, op, dev, stream)
		return nil
	})
}

func (r *reader) loadRuntime() error {
	q := `SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME`
	return r.rowsOf(q, func(scan func(...any) error) error {
		var start, end, name int64
		var gtid, corr sql.NullInt64
		if err := scan(&start, &end, &gtid, &corr, &name); err != nil {
			return err
		}
		if end < start {
			r.badTime++
			return nil
		}
		pid, tid := (gtid.Int64>>24)&0xFFFFFF, gtid.Int64&0xFFFFFF
		p := r.proc(pid)
		p.b.AddRuntime(trace.RuntimeCall{Start: start, End: end, Corr: corr.Int64, Name: p.name(r, name),
			Thread: p.b.Thread(pid, tid), Kind: r.runtimeKind[name]})
		return nil
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
	q := fmt.Sprintf(`SELECT start, end, globalTid, %s, %s FROM NVTX_EVENTS WHERE eventType IN (%d, %d) AND end IS NOT NULL`, text, textID, nvtxPushPop, nvtxStartEnd)
	return r.rowsOf(q, func(scan func(...any) error) error {
		var start, end int64
		var gtid, tid sql.NullInt64
		var txt sql.NullString
		if err := scan(&start, &end, &gtid, &txt, &tid); err != nil {
			return err
		}
		if end < start {
			r.badTime++
			return nil
		}
		s := txt.String
		if !txt.Valid && tid.Valid {
			s = r.strings[tid.Int64]
		}
		pid, th := (gtid.Int64>>24)&0xFFFFFF, gtid.Int64&0xFFFFFF
		p := r.proc(pid)
		p.b.AddCPU(trace.CPUOp{Start: start, End: end, Name: p.b.Intern(s), Thread: p.b.Thread(pid, th),
			Kind: trace.ClassifyCPU(s, trace.Annotation)})
		return nil
	})
}

func (r *reader) loadOSRT() error {
	if !r.sch.has("OSRT_API") {
		return nil
	}
	return r.rowsOf(`SELECT start, end, globalTid, nameId FROM OSRT_API`, func(scan func(...any) error) error {
		var start, end, name int64
		var gtid sql.NullInt64
		if err := scan(&start, &end, &gtid, &name); err != nil {
			return err
		}
		if end < start {
			r.badTime++
			return nil
		}
		pid, th := (gtid.Int64>>24)&0xFFFFFF, gtid.Int64&0xFFFFFF
		p := r.proc(pid)
		p.b.AddCPU(trace.CPUOp{Start: start, End: end, Name: p.name(r, name), Thread: p.b.Thread(pid, th), Kind: trace.Operator})
		return nil
	})
}

func (r *reader) loadThreadNames() error {
	if !r.sch.has("ThreadNames") {
		return nil
	}
	return r.rowsOf(`SELECT globalTid, nameId FROM ThreadNames`, func(scan func(...any) error) error {
		var gtid, name sql.NullInt64
		if err := scan(&gtid, &name); err != nil {
			return err
		}
		pid, th := (gtid.Int64>>24)&0xFFFFFF, gtid.Int64&0xFFFFFF
		if p := r.procs[pid]; p != nil {
			p.b.SetThreadName(p.b.Thread(pid, th), r.strings[name.Int64])
		}
		return nil
	})
}
