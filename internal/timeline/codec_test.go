package timeline

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

func u64(v uint64) *uint64   { return &v }
func f64(v float64) *float64 { return &v }
func intp(v int) *int        { return &v }
func u32(v uint32) *uint32   { return &v }

func sampleTimeline() *Timeline {
	pk := ProcKey{PID: 100, StartTime: 5000}
	tk := ThreadKey{TID: 101, StartTime: 5001}
	tl := &Timeline{
		Meta: Meta{SchemaVersion: SchemaVersion, Tool: "gpufeed test", Hostname: "h", Kernel: "6.18", NumCPU: 2,
			ClockTick: 100, PageSize: 4096, Started: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
			Interval: Duration(100 * time.Millisecond), Duration: Duration(time.Second),
			Target:   Target{PID: 100, StartTime: 5000, Command: []string{"python3", "train.py"}, Launched: true, ExitCode: intp(3)},
			ProcRoot: "/proc", SysRoot: "/sys", GPUSource: "simulated", Arch: "x86_64",
			Tiers:      Tiers{Slow: Duration(time.Second), Rollup: Duration(5 * time.Second)},
			NotVisible: map[string]string{"psi": "absent"},
			Observer:   &Observer{CPUUserNS: 1, CPUSysNS: 2, WallNS: 3, ThreadSamples: 4, TickP50NS: 5, TickMaxNS: 6},
			Ended:      "duration"},
		Procs: map[ProcKey]*ProcInfo{pk: {Key: pk, PPID: 1, Comm: "python3", Cmdline: []string{"python3", "train.py"},
			Env: map[string]string{"RANK": "0"}, Role: "trainer", NoFileSoft: u64(1024), NoFileHard: u64(4096),
			CPUsAllowed: "0-1", MemsAllowed: "0", FirstSeen: 0, LastSeen: 100, NotVisible: map[string]string{"io": "not visible"}}},
		Threads: map[ThreadKey]*ThreadInfo{tk: {Key: tk, PID: 100, Comm: "pt_autograd_0", Role: "autograd", FirstSeen: 0, LastSeen: 100, Exited: true}},
		Devices: []gpu.DeviceInfo{{Index: 0, Name: "sim", Simulated: true, MaxSMClockMHz: u32(1980)}},
		Events:  []Event{{T: 50, Kind: EventProcStart, PID: 100, Text: "python3"}},
		Counts:  Counts{VanishedThreads: 1, Overruns: 2},
	}
	for i := 0; i < 3; i++ {
		tl.Ticks = append(tl.Ticks, Tick{T: int64(i) * 100,
			Threads: []ThreadSample{{TID: 101, PID: 100, State: 'S', UTime: uint64(i), RunNS: uint64(i * 1000),
				Switches: &Switches{Voluntary: 1}, Blocked: &Blocked{Wchan: "futex_do_wait", Syscall: "futex", On: "futex 0x1"}}},
			Procs: []ProcSample{{PID: 100, Threads: 1, RSSPages: 10, FDs: intp(7), IO: &IO{RChar: 9}, PSSBytes: u64(1), USSBytes: u64(2)}},
			Host: &HostSample{CPUs: []CPUTimes{{CPU: 0, User: uint64(i)}}, ProcsRunning: 2, PSI: &PSI{CPUSomeUS: 3},
				Mem: &MemInfo{Total: 10, Available: 5}, Disks: []DiskStat{{Name: "vda", Reads: 1}}},
			GPUs: []gpu.Sample{{Index: 0, At: time.Date(2026, 1, 2, 3, 4, 5, int(i), time.UTC), UtilPercent: f64(0.1 + float64(i)/3),
				Points: []gpu.UtilPoint{{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Percent: 33.3}}}},
		})
	}
	return tl
}

// canonical renders a timeline with every part, for comparison.
func canonical(t *testing.T, tl *Timeline) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Meta    Meta
		Procs   []*ProcInfo
		Threads []*ThreadInfo
		Ticks   []Tick
		Devices []gpu.DeviceInfo
		Events  []Event
		Counts  Counts
	}{tl.Meta, mapValues(tl.Procs), mapValues(tl.Threads), tl.Ticks, tl.Devices, tl.Events, tl.Counts})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mapValues[K comparable, V any](m map[K]V) []V {
	var out []V
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	tl := sampleTimeline()
	var buf bytes.Buffer
	if err := Encode(&buf, tl); err != nil {
		t.Fatal(err)
	}
	got, warnings, err := Decode(&buf, "rec")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("decode: %v %v", err, warnings)
	}
	if a, b := canonical(t, tl), canonical(t, got); a != b {
		t.Errorf("round trip changed the timeline:\n%s\n%s", a, b)
	}
}

func TestStreamingWriterMatchesEncode(t *testing.T) {
	tl := sampleTimeline()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	meta := tl.Meta
	meta.Ended, meta.Observer = "", nil // as at the start of a run
	w.WriteMeta(meta)
	w.WriteDevices(tl.Devices)
	for _, p := range tl.Procs {
		w.WriteProc(p)
	}
	for _, th := range tl.Threads {
		w.WriteThread(th)
	}
	for i := range tl.Ticks {
		w.WriteTick(&tl.Ticks[i])
	}
	w.WriteEvent(tl.Events[0])
	if err := w.Close(tl); err != nil {
		t.Fatal(err)
	}
	got, warnings, err := Decode(&buf, "rec")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("decode: %v %v", err, warnings)
	}
	if a, b := canonical(t, tl), canonical(t, got); a != b {
		t.Errorf("the end record must carry the final meta and facts:\n%s\n%s", a, b)
	}
}

func TestTruncatedRecordingKeepsWhatItHeld(t *testing.T) {
	tl := sampleTimeline()
	var buf bytes.Buffer
	if err := Encode(&buf, tl); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	// Cut the compressed stream at every length past the header: never an
	// error past line 1, never a panic, and never more ticks than written.
	sawPartial := false
	for n := len(full) - 1; n > 20; n-- {
		got, warnings, err := Decode(bytes.NewReader(full[:n]), "cut")
		if err != nil {
			if strings.Contains(err.Error(), "line 1") || strings.Contains(err.Error(), "empty recording") || strings.Contains(err.Error(), "gzip") {
				continue // cut inside the header: nothing to keep
			}
			t.Fatalf("cut at %d: %v", n, err)
		}
		if len(warnings) == 0 {
			t.Fatalf("cut at %d: no truncation warning", n)
		}
		if len(got.Ticks) > len(tl.Ticks) {
			t.Fatalf("cut at %d: %d ticks", n, len(got.Ticks))
		}
		if len(got.Ticks) > 0 && len(got.Ticks) < len(tl.Ticks) {
			sawPartial = true
		}
	}
	_ = sawPartial // gzip buffers small streams: a tiny recording may flush all at once
}

func TestTruncatedAfterFlushKeepsFlushedTicks(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	tl := sampleTimeline()
	w.WriteMeta(tl.Meta)
	for i := range tl.Ticks {
		w.WriteTick(&tl.Ticks[i])
	}
	w.gz.Flush() // what the periodic flush does during a run
	// The process dies here: no end record, no gzip trailer.
	got, warnings, err := Decode(bytes.NewReader(buf.Bytes()), "crash.gpufeed")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ticks) != 3 || len(warnings) != 1 || !strings.Contains(warnings[0], "truncated recording") {
		t.Errorf("got %d ticks, warnings %q", len(got.Ticks), warnings)
	}
}

func TestDecodeRefusesUnknownVersionAndForeignFiles(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write([]byte(`{"format":"gpufeed-timeline","schema_version":99,"meta":{}}` + "\n"))
	gz.Close()
	_, _, err := Decode(&buf, "new.gpufeed")
	if err == nil || !strings.Contains(err.Error(), "schema version 99") || !strings.Contains(err.Error(), "new.gpufeed") {
		t.Errorf("unknown version: %v", err)
	}
	if _, _, err := Decode(strings.NewReader("hello"), "x.txt"); err == nil || !strings.Contains(err.Error(), "not a gpufeed recording") {
		t.Errorf("not gzip: %v", err)
	}
	buf.Reset()
	gz = gzip.NewWriter(&buf)
	gz.Write([]byte(goodHeader + "\n{oops\n{}\n"))
	gz.Close()
	if _, _, err := Decode(&buf, "bad"); err == nil || !strings.Contains(err.Error(), "bad: line 2") {
		t.Errorf("corrupt line: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	Encode(&buf, sampleTimeline())
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:len(buf.Bytes())/2])
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = Decode(bytes.NewReader(b), "fuzz")
	})
}

// TestDecodeScrubsCommandLines: a recording made before command lines were
// scrubbed where they are read still holds their secrets; read back, the
// processes' command lines are scrubbed (safetext.ScrubArgs), both from
// their proc records and from the end record.
func TestDecodeScrubsCommandLines(t *testing.T) {
	tl := &Timeline{
		Meta:  Meta{Tool: "gpufeed test", Interval: Duration(time.Second), Duration: Duration(2 * time.Second)},
		Procs: map[ProcKey]*ProcInfo{{PID: 7}: {Key: ProcKey{PID: 7}, Comm: "python", Cmdline: []string{"python", "x.py", "--password=hunter2", "--db", "postgres://u:pw@h/x"}}},
		Ticks: []Tick{{T: 0}, {T: int64(time.Second)}},
	}
	var b bytes.Buffer
	if err := Encode(&b, tl); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(gunzip(t, b.Bytes()), []byte("hunter2")) {
		t.Fatal("the test recording does not hold the secret")
	}
	got, _, err := Decode(&b, "old.gpufeed")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python", "x.py", "--password=***", "--db", "postgres://u:***@h/x"}
	if c := got.Procs[ProcKey{PID: 7}].Cmdline; !slices.Equal(c, want) {
		t.Errorf("cmdline %q, want %q", c, want)
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bombRecording is a recording whose third line is an event of mib MiB of
// one repeated byte, between two ticks, without an end record.
func bombRecording(t *testing.T, mib int) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	put := func(v any) {
		line, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(append(line, '\n'))
	}
	put(header{Format: FormatName, SchemaVersion: SchemaVersion, Meta: &Meta{Tool: "gpufeed test", Interval: Duration(time.Second), Duration: Duration(3 * time.Second)}})
	put(record{Tick: &Tick{T: 0}})
	zw.Write([]byte(`{"event":{"t":1,"kind":"kmsg","text":"`))
	chunk := bytes.Repeat([]byte("A"), 1<<20)
	for range mib {
		zw.Write(chunk)
	}
	zw.Write([]byte("\"}}\n"))
	put(record{Tick: &Tick{T: int64(time.Second)}})
	put(record{Event: &Event{T: 2, Kind: EventProcExit, PID: 7, Text: "python"}})
	zw.Close()
	return b.Bytes()
}

// TestDecodeBombLineBounded: a recording whose event line decompresses to
// 100 MB (from ~100 KB on disk: one repeated byte) is read in bounded
// memory: the line is dropped as it is read, past its cap, with a warning
// naming the file, the line, its offset and its size, and the rest of the
// recording is kept. The whole line was held (then parsed and copied): a
// 200 MB event took 697 MiB and 38 s.
func TestDecodeBombLineBounded(t *testing.T) {
	b := bytes.NewBuffer(bombRecording(t, 100))
	if b.Len() > 1<<20 {
		t.Fatalf("the bomb is %d bytes compressed", b.Len())
	}
	if os.Getenv("GPUFEED_WRITE_SEEDS") != "" {
		writeSeed(t, "event-over-cap", bombRecording(t, 2))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tl, warnings, err := Decode(b, "bomb.gpufeed")
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("reading allocated %d MiB for a 100 MiB line: want it dropped as read", alloc>>20)
	}
	if len(tl.Ticks) != 2 || len(tl.Events) != 1 || tl.Events[0].Text != "python" {
		var texts []int
		for _, e := range tl.Events {
			texts = append(texts, len(e.Text))
		}
		t.Errorf("kept %d ticks, events of texts of %v bytes: want the rest of the recording", len(tl.Ticks), texts)
	}
	if w := strings.Join(warnings, "\n"); !strings.Contains(w, "bomb.gpufeed: line 3 (byte ") || !strings.Contains(w, "event of 100.0 MiB, more than the 1.0 MiB a sampler writes at most: skipped") {
		t.Errorf("warnings %q: want one naming the file, the line, its offset and size", warnings)
	}
}

// A recording holds the job's own names and command lines; -o json writes
// their bidirectional controls as \u escapes (safetext.EscapeJSON), so that
// a terminal showing it is not reordered. The recording, read with zcat or
// jq, must be as safe: the same escapes, decoding to the same values.
func TestRecordingEscapesBidiControlsAsJSONOutputDoes(t *testing.T) {
	tl := sampleTimeline()
	evil := "train\u202eyp.3nohtyp"
	for _, p := range tl.Procs {
		p.Comm, p.Cmdline = evil, []string{"python3", evil}
	}
	tl.Meta.Target.Command = []string{evil}
	tl.Events[0].Text = evil
	var buf bytes.Buffer
	if err := Encode(&buf, tl); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if _, err := plain.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Bytes(), []byte("\u202e")) {
		t.Errorf("the recording holds U+202E unescaped:\n%s", plain.String())
	}
	if !bytes.Contains(plain.Bytes(), []byte(`train\u202eyp`)) {
		t.Errorf("the recording does not hold the escaped name:\n%s", plain.String())
	}
	got, warnings, err := Decode(bytes.NewReader(buf.Bytes()), "rec")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("decode: %v %v", err, warnings)
	}
	if a, b := canonical(t, tl), canonical(t, got); a != b {
		t.Errorf("escaping changed what the recording decodes to:\n%s\n%s", a, b)
	}
}
