package nsys

import (
	"database/sql"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// No Nsight Systems here: fixtures are built from NVIDIA's documented export
// schema (table and column names and types as `nsys export --type sqlite`
// writes them, schema 3.x) and filled from a trace model, so the same
// events can be read through both readers and compared.

// fixtureSchema creates the export tables this reader uses, with the
// columns and types the documented schema gives them (a subset of the
// columns, not of the tables' names or types).
var fixtureSchema = []string{
	`CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)`,
	`CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER)`,
	`CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER,
		l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, uuid TEXT,
		chipName TEXT, cuDevice INTEGER, computeMajor INTEGER, computeMinor INTEGER)`,
	`CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL, stopTime INTEGER NOT NULL)`,
	`CREATE TABLE %s (name TEXT NOT NULL, value TEXT)`,
	`CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
		contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
		demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
		registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
		blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
		dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
		gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER)`,
	`CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
		contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
		bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
		srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
		graphNodeId INTEGER, virtualAddress INTEGER)`,
	`CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
		contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
		value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER)`,
	`CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
		globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER)`,
	`CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
		contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
		syncType INTEGER NOT NULL, eventId INTEGER NOT NULL)`,
	`CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER,
		color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
		int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER,
		jsonText TEXT, binaryData TEXT)`,
	`CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
		nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, nestingLevel INTEGER, callchainId INTEGER NOT NULL)`,
	`CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT)`,
	`CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT)`,
	`CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT)`,
	`INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (0,'CUDA_MEMCPY_KIND_UNKNOWN','Unknown'),(1,'CUDA_MEMCPY_KIND_HTOD','Host-to-Device'),
		(2,'CUDA_MEMCPY_KIND_DTOH','Device-to-Host'),(8,'CUDA_MEMCPY_KIND_DTOD','Device-to-Device'),(9,'CUDA_MEMCPY_KIND_HTOH','Host-to-Host'),
		(10,'CUDA_MEMCPY_KIND_PTOP','Peer-to-Peer')`,
	`INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0,'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE','Pageable'),(1,'CUDA_MEMOPR_MEMORY_KIND_PINNED','Pinned'),
		(2,'CUDA_MEMOPR_MEMORY_KIND_DEVICE','Device'),(3,'CUDA_MEMOPR_MEMORY_KIND_ARRAY','Array'),(4,'CUDA_MEMOPR_MEMORY_KIND_MANAGED','Managed'),
		(5,'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC','Device Static'),(6,'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC','Managed Static'),
		(7,'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN','Unknown')`,
	`INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (0,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN','Unknown'),
		(1,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE','Event sync'),(2,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT','Stream wait sync'),
		(3,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE','Stream sync'),(4,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE','Context sync')`,
}

type fixtureOpts struct {
	// metaTable is META_DATA_EXPORT (current) or EXPORT_META_DATA (older); "" writes none.
	metaTable string
	version   string
	// mutate runs last, to damage the schema.
	mutate []string
	// pageSize keeps seed files small.
	pageSize int
}

// writeFixture writes the processes' traces (pid → trace) into a new
// SQLite file at path, as an Nsight Systems export would hold them.
func writeFixture(t testing.TB, path string, procs map[int64]*trace.Trace, o fixtureOpts) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", strings.SplitN(q, "\n", 2)[0], err)
		}
	}
	if o.pageSize > 0 {
		exec(fmt.Sprintf("PRAGMA page_size = %d", o.pageSize))
	}
	exec("BEGIN")
	for _, q := range fixtureSchema {
		if strings.Contains(q, "%s") {
			if o.metaTable == "" {
				continue
			}
			q = fmt.Sprintf(q, o.metaTable)
		}
		exec(q)
	}
	if o.metaTable != "" {
		exec(`INSERT INTO "`+o.metaTable+`" VALUES ('EXPORT_PRODUCT_VERSION', '2024.6.2.225'), ('EXPORT_SCHEMA_VERSION', ?)`, o.version)
	}
	exec(`INSERT INTO TARGET_INFO_GPU (vmId, id, name, totalMemory, smCount, cuDevice) VALUES (0, 0, 'NVIDIA A100-SXM4-80GB', 84990623744, 108, 0)`)
	strs := map[string]int64{}
	str := func(s string) int64 {
		if id, ok := strs[s]; ok {
			return id
		}
		id := int64(len(strs) + 1)
		strs[s] = id
		exec(`INSERT INTO StringIds VALUES (?, ?)`, id, s)
		return id
	}
	memKind := map[trace.MemKind]int64{trace.Pageable: 0, trace.Pinned: 1, trace.DeviceMem: 2, trace.Array: 3, trace.Managed: 4, trace.MemUnknown: 7}
	copyKind := map[trace.CopyKind]int64{trace.HtoD: 1, trace.DtoH: 2, trace.DtoD: 8, trace.HtoH: 9, trace.PtoP: 10}
	var minT, maxT int64 = math.MaxInt64, 0
	for pid, tr := range procs {
		gp := pid << 24
		gtid := func(th uint32) int64 { return gp | tr.Threads[th].TID&0xFFFFFF }
		for i, th := range tr.Threads {
			if th.Name != "" {
				exec(`INSERT INTO ThreadNames VALUES (?, 0, ?)`, str(th.Name), gtid(uint32(i)))
			}
		}
		for _, g := range tr.GPU {
			minT, maxT = min(minT, g.Start), max(maxT, g.End)
			st := tr.Streams[g.Stream]
			switch g.Kind {
			case trace.Kernel:
				name := str(tr.Name(g.Name))
				blocks := int64(math.Round(float64(g.BlocksPerSM) * 108))
				exec(`INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid,
					demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory,
					dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId)
					VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, 32, ?, 1, 1, 128, 1, 1, 0, 0, 0, 0, ?)`,
					g.Start, g.End, st.Device, st.ID, g.Corr, gp, name, name, blocks, g.Corr)
			case trace.Memcpy:
				exec(`INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid,
					bytes, copyKind, srcKind, dstKind) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)`,
					g.Start, g.End, st.Device, st.ID, g.Corr, gp, g.Bytes, copyKind[g.Copy], memKind[g.Src], memKind[g.Dst])
			case trace.Memset:
				exec(`INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, globalPid,
					value, bytes, memKind) VALUES (?, ?, ?, 1, ?, ?, ?, 0, ?, ?)`,
					g.Start, g.End, st.Device, st.ID, g.Corr, gp, g.Bytes, memKind[g.Dst])
			}
		}
		for i, r := range tr.Runtime {
			// Nsight appends the API version to runtime function names.
			name := tr.Name(r.Name) + "_v" + fmt.Sprint(3020+i%2*3980)
			exec(`INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)`, r.Start, r.End, gtid(r.Thread), r.Corr, str(name))
			if r.Kind == trace.StreamSync {
				exec(`INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?, ?, 0, 1, NULL, 7, ?, ?, 3, 0)`, r.Start, r.End, r.Corr, gp)
			}
		}
		for i, c := range tr.CPU {
			// Alternate between inline text and a registered string id.
			if i%2 == 0 {
				exec(`INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)`, c.Start, c.End, tr.Name(c.Name), gtid(c.Thread))
			} else {
				exec(`INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid) VALUES (?, ?, 60, ?, ?)`, c.Start, c.End, str(tr.Name(c.Name)), gtid(c.Thread))
			}
		}
		// An NVTX mark (no end) that must be ignored.
		exec(`INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, NULL, 34, 'mark', ?)`, minT, gp)
	}
	if minT < maxT {
		exec(`INSERT INTO ANALYSIS_DETAILS VALUES (0, ?, ?, ?)`, maxT-minT, minT, maxT)
	}
	for _, q := range o.mutate {
		exec(q)
	}
	exec("COMMIT")
}
