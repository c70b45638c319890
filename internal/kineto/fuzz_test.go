package kineto

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder, whole and in tiny chunks
// on several workers: it must never panic or hang, chunking must not change
// the outcome, and every trace it returns must pass trace.Check. The seed
// corpus is in testdata/fuzz/FuzzDecode; CI runs the seeds only.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(tiny))
	f.Add([]byte(`[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"stream":7}}]`))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a}, {b","pid":1,"tid":"t","ts":inf,"dur":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		whole, err := Decode(bytes.NewReader(data), "fuzz.json", Options{Workers: 1, ChunkBytes: 1 << 20})
		chunked, err2 := Decode(bytes.NewReader(data), "fuzz.json", Options{Workers: 3, ChunkBytes: 13})
		if (err == nil) != (err2 == nil) {
			t.Fatalf("whole err %v, chunked err %v", err, err2)
		}
		if err != nil {
			return
		}
		if whole.Counts != chunked.Counts || len(whole.Warnings) != len(chunked.Warnings) {
			t.Fatalf("chunking changed the result: %+v %q vs %+v %q", whole.Counts, whole.Warnings, chunked.Counts, chunked.Warnings)
		}
		if err := whole.Check(); err != nil {
			t.Fatal(err)
		}
	})
}
