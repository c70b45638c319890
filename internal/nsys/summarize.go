package nsys

import (
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// summarize computes the rule totals in SQL, per process. Which runtime
// functions count as what is decided once per distinct function name by
// trace.ClassifyRuntime (the same classification the event model uses), and
// handed to SQL as lists of StringIds ids; the aggregation over the calls
// runs in SQLite.
func (r *reader) summarize() error {
	ids := map[trace.RuntimeKind][]int64{}
	for id, k := range r.runtimeKind {
		ids[k] = append(ids[k], id)
	}
	for k := range ids {
		slices.Sort(ids[k])
	}
	rtPid := fmt.Sprintf(pidOf, "r.globalTid")
	// Only the rows the loader keeps count (rows.go): integers where the
	// schema has them, times a profiler records (trace.ImpossibleTime).
	rtOK := validSQL("r", runtimeInts) + " AND " + r.possibleSQL("r", false)
	mOK := validSQL("m", memcpyInts) + " AND " + r.possibleSQL("m", true)
	calls := func(kind trace.RuntimeKind, set func(*trace.Summaries, trace.CallSummary)) error {
		list := ids[kind]
		if len(list) == 0 {
			return nil
		}
		var q string
		if (kind == trace.MemcpySync) && r.sch.has("CUPTI_ACTIVITY_KIND_MEMCPY") {
			// Bytes of blocking copies come from their GPU copy records.
			q = fmt.Sprintf(`SELECT %[1]s AS pid, count(*), sum(r.end - r.start), max(r.end - r.start),
				sum(coalesce((SELECT sum(m.bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m
				              WHERE m.correlationId = r.correlationId AND %[2]s = %[1]s AND %[5]s), 0))
				FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r WHERE r.nameId IN (%[3]s) AND %[4]s GROUP BY pid`,
				rtPid, fmt.Sprintf(pidOf, "m.globalPid"), inList(list), rtOK, mOK)
		} else {
			q = fmt.Sprintf(`SELECT %s AS pid, count(*), sum(r.end - r.start), max(r.end - r.start), 0
				FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r WHERE r.nameId IN (%s) AND %s GROUP BY pid`, rtPid, inList(list), rtOK)
		}
		return r.aggregate(q, set)
	}
	if err := calls(trace.MemcpySync, func(s *trace.Summaries, c trace.CallSummary) { s.SyncCopies = c }); err != nil {
		return err
	}
	if err := calls(trace.MemsetSync, func(s *trace.Summaries, c trace.CallSummary) { s.SyncMemsets = c }); err != nil {
		return err
	}
	if err := calls(trace.StreamSync, func(s *trace.Summaries, c trace.CallSummary) { s.StreamSyncs = c }); err != nil {
		return err
	}
	if err := calls(trace.DeviceSync, func(s *trace.Summaries, c trace.CallSummary) { s.DeviceSyncs = c }); err != nil {
		return err
	}
	if err := calls(trace.EventSync, func(s *trace.Summaries, c trace.CallSummary) { s.EventSyncs = c }); err != nil {
		return err
	}
	// Async copies touching pageable memory: the copy record says the
	// memory kinds, the runtime call it correlates with says "Async".
	var pageable []int64
	for id, k := range r.memKind {
		if k == trace.Pageable {
			pageable = append(pageable, id)
		}
	}
	slices.Sort(pageable)
	if len(ids[trace.MemcpyAsync]) > 0 && len(pageable) > 0 && r.sch.has("CUPTI_ACTIVITY_KIND_MEMCPY") {
		q := fmt.Sprintf(`SELECT %[1]s AS pid, count(*), sum(r.end - r.start), max(r.end - r.start), sum(m.bytes)
			FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m
			JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
			  ON r.correlationId = m.correlationId AND %[1]s = %[2]s
			WHERE (m.srcKind IN (%[3]s) OR m.dstKind IN (%[3]s)) AND r.nameId IN (%[4]s) AND %[5]s AND %[6]s
			GROUP BY pid`, rtPid, fmt.Sprintf(pidOf, "m.globalPid"), inList(pageable), inList(ids[trace.MemcpyAsync]), rtOK, mOK)
		if err := r.aggregate(q, func(s *trace.Summaries, c trace.CallSummary) { s.PageableAsyncCopies = c }); err != nil {
			return err
		}
	}
	return nil
}

// aggregate runs a query returning (pid, count, total, max, bytes) rows.
func (r *reader) aggregate(q string, set func(*trace.Summaries, trace.CallSummary)) error {
	rows, err := r.db.Query(q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pid, n int64
		var tot, mx, bytes sql.NullInt64
		if err := rows.Scan(&pid, &n, &tot, &mx, &bytes); err != nil {
			return err
		}
		if p := r.procs[pid]; p != nil {
			set(&p.sum, trace.CallSummary{Count: n, TotalNs: tot.Int64, MaxNs: mx.Int64, Bytes: bytes.Int64})
		}
	}
	return rows.Err()
}

func inList(ids []int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}

// possibleSQL is trace.ImpossibleTime's test, negated, in SQL: the rows of
// alias whose times the loader keeps; with gpu, trace.OutsideWindow's too.
func (r *reader) possibleSQL(alias string, gpu bool) string {
	c := fmt.Sprintf("%[1]s.start >= 0 AND %[1]s.end >= %[1]s.start AND %[1]s.end <= %[2]d", alias, trace.MaxTime)
	if ws, we := r.profStart, r.profEnd; gpu && we > ws && ws >= 0 && we <= trace.MaxTime {
		c += fmt.Sprintf(" AND %[2]d - %[1]s.start <= %[4]d AND %[1]s.end - %[3]d <= %[4]d", alias, ws, we, we-ws)
	}
	return c
}
