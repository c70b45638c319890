package kineto

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// tiny is a hand-written Kineto trace with what real ones contain: unsorted
// events, string thread ids, an escaped name, nanosecond timestamps beyond
// float64's precision, a pageable copy, a sync, a NaN time, metadata after
// the events, and no distributedInfo.
const tiny = `{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA A100", "numSms": 108, "totalGlobalMem": 42505273344}],
  "traceEvents": [
  {"ph": "X", "cat": "kernel", "name": "void gemm<float>(\"a\")", "pid": 0, "tid": 7, "ts": 1712195495519700.125, "dur": 10.5,
   "args": {"External id": 3, "device": 0, "stream": 7, "correlation": 101, "grid": [1, 2, 3], "blocks per SM": 0.5}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10, "ts": 1712195495519690.001, "dur": 4.999,
   "args": {"correlation": 101, "cbid": 211}},
  {"ph": "s", "id": 101, "pid": 10, "tid": 10, "ts": 1712195495519690.001, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 10, "tid": 10, "ts": 1712195495519600, "dur": 500},
  {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 10, "tid": 10, "ts": 1712195495519601, "dur": 50},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, "ts": 1712195495519660, "dur": 20,
   "args": {"device": 0, "stream": 7, "correlation": 100, "bytes": 4096}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 10, "tid": 10, "ts": 1712195495519652, "dur": 30,
   "args": {"correlation": 100}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 10, "tid": 10, "ts": 1712195495519720, "dur": 12, "args": {"correlation": 102}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 10, "tid": "worker \"7\"", "ts": 1712195495519650, "dur": 35},
  {"ph": "X", "cat": "cpu_op", "name": "aten::bad", "pid": 10, "tid": 10, "ts": NaN, "dur": 1},
  {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1712195495519500, "dur": 1000},
  {"name": "thread_name", "ph": "M", "ts": 1712195495519500, "pid": 10, "tid": 10, "args": {"name": "thread 10 (python)"}},
  {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 1712195495520500}
  ],
  "traceName": "tiny",
  "displayTimeUnit": "ns"
}`

func decodeString(t *testing.T, s string, opt Options) *trace.Trace {
	t.Helper()
	tr, err := Decode(strings.NewReader(s), "tiny.json", opt)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return tr
}

func TestDecodeTiny(t *testing.T) {
	tr := decodeString(t, tiny, Options{})
	if got, want := len(tr.GPU), 2; got != want {
		t.Fatalf("GPU ops = %d, want %d", got, want)
	}
	// Sorted by (stream, start): the copy first.
	cp, k := tr.GPU[0], tr.GPU[1]
	if cp.Kind != trace.Memcpy || cp.Copy != trace.HtoD || cp.Src != trace.Pageable || cp.Dst != trace.DeviceMem || cp.Bytes != 4096 {
		t.Errorf("copy = %+v, want a 4096-byte pageable HtoD memcpy", cp)
	}
	if k.Kind != trace.Kernel || k.Start != 1712195495519700125 || k.End != 1712195495519710625 {
		t.Errorf("kernel times = %d..%d, want exact ns 1712195495519700125..1712195495519710625", k.Start, k.End)
	}
	if got := tr.Name(k.Name); got != `void gemm<float>("a")` {
		t.Errorf("kernel name = %q, want the unescaped name", got)
	}
	if k.BlocksPerSM != 0.5 {
		t.Errorf("blocks per SM = %v, want 0.5", k.BlocksPerSM)
	}
	if k.Launch < 0 || tr.Name(tr.Runtime[k.Launch].Name) != "cudaLaunchKernel" {
		t.Fatalf("kernel not linked to cudaLaunchKernel: launch %d", k.Launch)
	}
	launch := tr.Runtime[k.Launch]
	if launch.Kind != trace.Launch || launch.Start != 1712195495519690001 || launch.End != 1712195495519695000 {
		t.Errorf("launch = %+v", launch)
	}
	if cp.Launch < 0 || tr.Runtime[cp.Launch].Kind != trace.MemcpyAsync {
		t.Errorf("copy not linked to cudaMemcpyAsync")
	}
	var sync *trace.RuntimeCall
	for i := range tr.Runtime {
		if tr.Runtime[i].Kind == trace.StreamSync {
			sync = &tr.Runtime[i]
		}
	}
	if sync == nil || sync.GPU != -1 {
		t.Errorf("stream sync missing or wrongly linked: %+v", sync)
	}
	kinds := map[trace.CPUKind]int{}
	for _, c := range tr.CPU {
		kinds[c.Kind]++
	}
	if kinds[trace.Step] != 1 || kinds[trace.DataLoaderNext] != 1 || kinds[trace.Operator] != 1 {
		t.Errorf("cpu kinds = %v, want one step, one dataloader, one operator", kinds)
	}
	if tr.Counts.BadTime != 1 {
		t.Errorf("bad-time events = %d, want 1", tr.Counts.BadTime)
	}
	if !hasWarning(tr, "NaN", "byte offset") {
		t.Errorf("no warning naming the NaN event and its offset: %q", tr.Warnings)
	}
	if tr.Meta.Rank != -1 {
		t.Errorf("rank = %d, want -1 (no distributedInfo)", tr.Meta.Rank)
	}
	if tr.Meta.DisplayTimeUnit != "ns" || len(tr.Meta.Devices) != 1 || tr.Meta.Devices[0].SMs != 108 {
		t.Errorf("meta = %+v", tr.Meta)
	}
	if tr.Meta.ProfiledStart != 1712195495519500000 || tr.Meta.ProfiledEnd != 1712195495520500000 {
		t.Errorf("profiled window = %d..%d", tr.Meta.ProfiledStart, tr.Meta.ProfiledEnd)
	}
	var named, labelled bool
	for _, th := range tr.Threads {
		if th.PID == 10 && th.TID == 10 && th.Name == "thread 10 (python)" {
			named = true
		}
		if strings.Contains(th.Label, `worker "7"`) {
			labelled = true
		}
	}
	if !named || !labelled {
		t.Errorf("threads = %+v: want thread 10 named and the string tid kept", tr.Threads)
	}
	if tr.Counts.Flows != 1 || tr.Counts.Metadata != 1 || tr.Counts.Instants != 1 {
		t.Errorf("counts = %+v", tr.Counts)
	}
	if len(tr.Warnings) != 1 {
		t.Errorf("warnings = %q, want only the NaN one", tr.Warnings)
	}
}

func hasWarning(tr *trace.Trace, parts ...string) bool {
	for _, w := range tr.Warnings {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(w, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestChunkingDoesNotChangeResult decodes the same text whole and in tiny
// chunks on several workers, including names that look like event
// boundaries ("}, {") so that cuts fall inside strings.
func TestChunkingDoesNotChangeResult(t *testing.T) {
	tricky := strings.Replace(tiny, `"aten::copy_"`, `"aten::copy_}, {\"ph\": \"X\"}, {"`, 1)
	for _, src := range []string{tiny, tricky} {
		whole := decodeString(t, src, Options{Workers: 1, ChunkBytes: 1 << 20})
		for _, size := range []int{7, 31, 64, 200, 513} {
			for _, workers := range []int{1, 3} {
				got := decodeString(t, src, Options{Workers: workers, ChunkBytes: size})
				if !reflect.DeepEqual(got, whole) {
					t.Fatalf("chunk %d, workers %d: result differs from whole-file decode\n got %+v\nwant %+v", size, workers, got.Counts, whole.Counts)
				}
			}
		}
	}
}

func TestRealTracesChunkInvariant(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "traces", "critical_path", "alexnet", "benchmark_result_2869224_1695835535_trace.json.gz")
	whole, err := DecodeFile(path, Options{Workers: 1, ChunkBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	chunked, err := DecodeFile(path, Options{Workers: 4, ChunkBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(whole, chunked) {
		t.Fatalf("4 KiB chunks on 4 workers differ from a single chunk: %+v vs %+v", chunked.Counts, whole.Counts)
	}
}

// TestTruncated cuts the trace at every position inside the events array:
// the decoder must never fail, must keep every event that was complete, and
// must warn with a byte offset.
func TestTruncated(t *testing.T) {
	start := strings.Index(tiny, `"traceEvents": [`) + len(`"traceEvents": [`)
	end := strings.LastIndex(tiny, "]")
	full := decodeString(t, tiny, Options{})
	for cut := start; cut < end; cut += 3 {
		src := tiny[:cut]
		for _, size := range []int{16, 1 << 20} {
			tr, err := Decode(strings.NewReader(src), "cut.json", Options{Workers: 2, ChunkBytes: size})
			if err != nil {
				t.Fatalf("cut at %d: %v", cut, err)
			}
			if !hasWarning(tr, "cut.json", "byte offset") {
				t.Fatalf("cut at %d: no truncation warning with an offset: %q", cut, tr.Warnings)
			}
			if tr.Counts.Events > full.Counts.Events {
				t.Fatalf("cut at %d: %d events, more than the whole file's %d", cut, tr.Counts.Events, full.Counts.Events)
			}
		}
	}
	// Cut right after an event: everything before it is kept.
	i := strings.Index(tiny, `{"ph": "X", "cat": "Trace"`)
	tr := decodeString(t, tiny[:i], Options{})
	if tr.Counts.Events != full.Counts.Events-3 {
		t.Errorf("cut before the last three events kept %d events, want %d", tr.Counts.Events, full.Counts.Events-3)
	}
	if !hasWarning(tr, "without the ']'") {
		t.Errorf("warnings = %q, want the missing-bracket warning", tr.Warnings)
	}
}

func TestTruncatedGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(strings.Repeat(tiny[:len(tiny)-200]+"\n", 1)))
	zw.Close()
	b := buf.Bytes()
	tr, err := Decode(bytes.NewReader(b[:len(b)-30]), "cut.json.gz", Options{})
	if err != nil {
		t.Fatalf("truncated gzip: %v", err)
	}
	if len(tr.Warnings) == 0 {
		t.Errorf("no warning for a truncated gzip stream")
	}
}

func TestGzipEqualsPlain(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(tiny))
	zw.Close()
	tr, err := Decode(&buf, "tiny.json", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := decodeString(t, tiny, Options{}); !reflect.DeepEqual(tr, want) {
		t.Errorf("gzip decode differs from plain decode")
	}
}

func TestArrayFormat(t *testing.T) {
	src := `[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7,"device":0}},
{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":5}]`
	tr := decodeString(t, src, Options{})
	if len(tr.GPU) != 1 || len(tr.CPU) != 1 || len(tr.Warnings) != 0 {
		t.Errorf("array format: gpu %d cpu %d warnings %q", len(tr.GPU), len(tr.CPU), tr.Warnings)
	}
}

func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		src    string
		offset int64
		msg    string
	}{
		{`{"traceEvents": [{"ph" "X"}]}`, 23, "expected ':'"},
		{`{"traceEvents": [{"ph": "X"} {"ph": "X"}]}`, 29, "expected ',' or ']'"},
		{`{"traceEvents": [7]}`, 17, "expected '{'"},
		{`{"schemaVersion" 1}`, 17, "expected ':'"},
		{`hello`, 0, "expected '{' or '['"},
		{``, 0, "empty file"},
		{`{"schemaVersion": 1`, 18, "file ends inside a top-level value"},
		{`{"schemaVersion": 1,`, 20, "file ends before traceEvents"},
	} {
		_, err := Decode(strings.NewReader(tc.src), "bad.json", Options{ChunkBytes: 8})
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: err = %v, want a SyntaxError", tc.src, err)
			continue
		}
		if se.Offset != tc.offset || !strings.Contains(se.Msg, tc.msg) || se.File != "bad.json" {
			t.Errorf("%q: got %v; want offset %d and %q", tc.src, err, tc.offset, tc.msg)
		}
	}
}

func TestNoEvents(t *testing.T) {
	// An object without traceEvents is not a trace (TestNotATrace); an
	// empty events array is an empty trace.
	if _, err := Decode(strings.NewReader(`{"schemaVersion": 1}`), "x.json", Options{}); err == nil || !strings.Contains(err.Error(), `no "traceEvents"`) {
		t.Errorf("no traceEvents: err = %v", err)
	}
	tr := decodeString(t, `{"traceEvents": []}`, Options{})
	if len(tr.Warnings) != 0 || tr.Counts.Events != 0 {
		t.Errorf("empty array: %+v %q", tr.Counts, tr.Warnings)
	}
}

// TestAllTestdataTracesParse decodes every real trace shipped in testdata.
func TestAllTestdataTracesParse(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "traces")
	n := 0
	err := filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(p, ".json.gz") {
			return err
		}
		n++
		tr, err := DecodeFile(p, Options{})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		if len(tr.Warnings) != 0 {
			t.Errorf("%s: unexpected warnings %q", p, tr.Warnings)
		}
		if tr.Counts.Events == 0 {
			t.Errorf("%s: no events", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 12 {
		t.Errorf("found %d traces, want the 12 of testdata/traces", n)
	}
}
