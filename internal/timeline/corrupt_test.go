package timeline

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recordingOf encodes a timeline with n ticks, flushed as a live run does.
func recordingOf(t *testing.T, n int) ([]byte, *Timeline) {
	t.Helper()
	tl := sampleTimeline()
	base := tl.Ticks[0]
	tl.Ticks = nil
	for i := range n {
		tk := base
		tk.T = int64(i) * int64(100*time.Millisecond)
		tl.Ticks = append(tl.Ticks, tk)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.WriteMeta(tl.Meta)
	w.WriteDevices(tl.Devices)
	for _, p := range tl.Procs {
		w.WriteProc(p)
	}
	for _, th := range tl.Threads {
		w.WriteThread(th)
	}
	for i := range tl.Ticks {
		w.WriteTick(&tl.Ticks[i])
		if i%5 == 4 {
			w.gz.Flush() // the once-a-second flush of a live run
		}
	}
	for _, e := range tl.Events {
		w.WriteEvent(e)
	}
	if err := w.Close(tl); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), tl
}

// A recording whose bytes changed after it was written must never be judged
// as if it held what was recorded. Every single-bit flip of a real recording
// either fails with an error naming the file, or yields exactly what was
// written (bits gzip does not cover: the header's time stamp and OS byte), or
// keeps a prefix of what was written and says it is unverified.
func TestDecodeNeverTrustsAFlippedBit(t *testing.T) {
	full, want := recordingOf(t, 12)
	wantTicks := canonicalTicks(t, want.Ticks)
	verdicts := map[string]int{}
	for pos := range full {
		for bit := range 8 {
			b := bytes.Clone(full)
			b[pos] ^= 1 << bit
			got, warnings, err := Decode(bytes.NewReader(b), "flipped.gpufeed")
			switch {
			case err != nil:
				if !strings.Contains(err.Error(), "flipped.gpufeed") {
					t.Fatalf("byte %d bit %d: error does not name the file: %v", pos, bit, err)
				}
				verdicts["refused"]++
			case len(warnings) == 0:
				if a, b := canonical(t, want), canonical(t, got); a != b {
					t.Fatalf("byte %d bit %d: decoded without a warning but the timeline changed", pos, bit)
				}
				verdicts["identical"]++
			default:
				joined := strings.Join(warnings, "; ")
				if strings.Contains(joined, "complete") && !strings.Contains(joined, "unverified") {
					t.Fatalf("byte %d bit %d: a changed recording called complete: %s", pos, bit, joined)
				}
				if !strings.Contains(joined, "unverified") {
					t.Fatalf("byte %d bit %d: kept data without saying it is unverified: %s", pos, bit, joined)
				}
				if len(got.Ticks) > len(want.Ticks) {
					t.Fatalf("byte %d bit %d: %d ticks from %d", pos, bit, len(got.Ticks), len(want.Ticks))
				}
				if g := canonicalTicks(t, got.Ticks); len(got.Ticks) > 0 && !strings.HasPrefix(wantTicks, strings.TrimSuffix(g, "]")) {
					t.Fatalf("byte %d bit %d: kept ticks that differ from those recorded (%s)", pos, bit, joined)
				}
				verdicts["kept a verified-looking prefix, said unverified"]++
			}
		}
	}
	t.Logf("%d flips: %v", 8*len(full), verdicts)
}

func canonicalTicks(t *testing.T, ticks []Tick) string {
	t.Helper()
	b, err := json.Marshal(ticks)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The checksum at the end of the stream is what tells a changed byte: a
// mismatch is an error naming the file and saying the data are not to be
// trusted, never "the samples are complete".
func TestDecodeRefusesChecksumMismatch(t *testing.T) {
	full, _ := recordingOf(t, 12)
	b := bytes.Clone(full)
	b[len(b)-6] ^= 0x10 // inside the CRC-32 of the trailer
	_, warnings, err := Decode(bytes.NewReader(b), "crc.gpufeed")
	if err == nil {
		t.Fatalf("a checksum mismatch was accepted with warnings %q", warnings)
	}
	for _, want := range []string{"crc.gpufeed", "checksum", "not to be trusted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// A recording cut short (a crash) keeps its complete lines and says that
// without gzip's checksum they are unverified.
func TestDecodeCutShortSaysUnverified(t *testing.T) {
	full, want := recordingOf(t, 12)
	got, warnings, err := Decode(bytes.NewReader(full[:len(full)-4]), "cut.gpufeed")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(warnings, "; ")
	if !strings.Contains(joined, "unverified") || len(got.Ticks) != len(want.Ticks) {
		t.Errorf("%d ticks, warnings %q", len(got.Ticks), joined)
	}
}

// gzipLines writes lines as a complete, well-formed gzip stream: what a
// hand-edited or buggy recording looks like, checksum and all.
func gzipLines(lines ...string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	for _, l := range lines {
		gz.Write([]byte(l + "\n"))
	}
	gz.Close()
	return buf.Bytes()
}

const goodHeader = `{"format":"gpufeed-timeline","schema_version":1,"meta":{"interval":"100ms","duration":"2s"}}`

// Timelines that cannot have been sampled are refused with the line that
// makes them impossible.
func TestDecodeRefusesImpossibleTimelines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"reversed ticks", []string{goodHeader, `{"tick":{"t":200000000}}`, `{"tick":{"t":100000000}}`}, "line 3"},
		{"duplicated tick", []string{goodHeader, `{"tick":{"t":0}}`, `{"tick":{"t":100000000}}`, `{"tick":{"t":100000000}}`}, "line 4"},
		{"negative tick time", []string{goodHeader, `{"tick":{"t":-5}}`}, "line 2"},
		{"negative window", []string{`{"format":"gpufeed-timeline","schema_version":1,"meta":{"interval":"100ms","duration":"-2s"}}`}, "line 1"},
		{"zero interval", []string{`{"format":"gpufeed-timeline","schema_version":1,"meta":{"interval":"0s","duration":"2s"}}`}, "line 1"},
		{"negative window in the end record", []string{goodHeader, `{"tick":{"t":0}}`, `{"end":{"meta":{"interval":"100ms","duration":"-1s"}}}`}, "line 3"},
		{"record after the end", []string{goodHeader, `{"tick":{"t":0}}`, `{"end":{"meta":{"interval":"100ms","duration":"2s"}}}`, `{"tick":{"t":5}}`}, "line 4"},
		{"bad last line of a complete stream", []string{goodHeader, `{"tick":{"t":0}}`, `{"tick":{"t":`}, "line 3"},
		// A kernel keeps at most 64 bytes of a name (16 for a thread, 64
		// for a kernel thread's full name): a 1 MB one was printed whole,
		// ten times over, in the JSON report of such a recording.
		{"process name no kernel keeps", []string{goodHeader, `{"proc":{"key":{"pid":1,"start_time":1},"comm":"` + strings.Repeat("x", 1<<20) + `"}}`}, "line 2"},
		{"thread name no kernel keeps", []string{goodHeader, `{"thread":{"key":{"tid":1,"start_time":1},"pid":1,"comm":"` + strings.Repeat("x", 65) + `"}}`}, "line 2"},
		{"name no kernel keeps in the end record", []string{goodHeader, `{"tick":{"t":0}}`, `{"end":{"procs":[{"key":{"pid":1,"start_time":1},"comm":"` + strings.Repeat("x", 100) + `"}]}}`}, "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, warnings, err := Decode(bytes.NewReader(gzipLines(tc.lines...)), "odd.gpufeed")
			if err == nil {
				t.Fatalf("accepted (warnings %q)", warnings)
			}
			if !strings.Contains(err.Error(), "odd.gpufeed: "+tc.want+":") {
				t.Errorf("error %q does not name %q", err, "odd.gpufeed: "+tc.want)
			}
		})
	}
}

// Bytes after the end of a complete, verified stream (a copy that appended
// garbage) do not change what it held: kept, with a warning.
func TestDecodeTrailingGarbageAfterVerifiedStream(t *testing.T) {
	full, want := recordingOf(t, 5)
	b := append(bytes.Clone(full), []byte("garbage after the end")...)
	got, warnings, err := Decode(bytes.NewReader(b), "tail.gpufeed")
	if err != nil {
		t.Fatal(err)
	}
	if canonical(t, got) != canonical(t, want) || len(warnings) != 1 || !strings.Contains(warnings[0], "after the end") {
		t.Errorf("warnings %q", warnings)
	}
}

// The corrupted and impossible recordings above are seeds of FuzzDecode.
func TestFuzzCorpusHoldsBadRecordings(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 5 {
		t.Errorf("%s holds %d seeds", dir, len(entries))
	}
}

// writeSeed writes a go-fuzz corpus file (go test fuzz v1) for b.
func writeSeed(t *testing.T, name string, b []byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// GPUFEED_WRITE_SEEDS=1 go test -run TestWriteFuzzSeeds rewrites the seeds.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("GPUFEED_WRITE_SEEDS") == "" {
		t.Skip("set GPUFEED_WRITE_SEEDS=1 to rewrite the fuzz seeds")
	}
	full, _ := recordingOf(t, 6)
	crc := bytes.Clone(full)
	crc[len(crc)-6] ^= 0x10
	writeSeed(t, "checksum-mismatch", crc)
	writeSeed(t, "cut-short", full[:len(full)-4])
	writeSeed(t, "reversed-ticks", gzipLines(goodHeader, `{"tick":{"t":200000000}}`, `{"tick":{"t":100000000}}`))
	writeSeed(t, "negative-window", gzipLines(`{"format":"gpufeed-timeline","schema_version":1,"meta":{"interval":"100ms","duration":"-2s"}}`))
	writeSeed(t, "after-end", gzipLines(goodHeader, `{"end":{"meta":{"interval":"100ms","duration":"2s"}}}`, `{"tick":{"t":5}}`))
	writeSeed(t, "long-comm", gzipLines(goodHeader, `{"proc":{"key":{"pid":1,"start_time":1},"comm":"`+strings.Repeat("x", 4096)+`"}}`))
	writeSeed(t, "long-event", gzipLines(goodHeader, `{"event":{"t":0,"kind":"read-error","text":"`+strings.Repeat("\u202e", 3000)+`"}}`))
}
