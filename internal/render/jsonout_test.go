package render

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// roundNumbers keeps keys in order, strings as they are (no HTML escapes),
// whole numbers under _ns and _bytes keys, three decimals elsewhere.
func TestRoundNumbers(t *testing.T) {
	doc := []byte(`{"b_ns":1234.56,"a":[1.23456,{"x_bytes":9.5,"y":0.0004,"s":"a<b & \u2028 \"q\""}],"c":[],"d":{},"e":null,"f":true,"g":12}`)
	got, err := roundNumbers(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"b_ns":1235,"a":[1.235,{"x_bytes":10,"y":0,"s":"a<b & \u2028 \"q\""}],"c":[],"d":{},"e":null,"f":true,"g":12}`
	if string(got) != want {
		t.Errorf("roundNumbers:\n got %s\nwant %s", got, want)
	}
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		t.Fatal("not JSON")
	}
	var out bytes.Buffer
	if err := writeJSON(&out, map[string]float64{"z_percent": 33.33333, "t_ns": 1e9 / 3}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "{\n  \"t_ns\": 333333333,\n  \"z_percent\": 33.333\n}\n" {
		t.Errorf("writeJSON: %q", out.String())
	}
}

// A process seen with no thread sampled (one that exec'd or exited between
// two ticks, as a shell wrapper does) has "threads": [], never null: the
// contract's arrays are always arrays.
func TestProcessWithoutThreadsHasAnEmptyList(t *testing.T) {
	tl := hostile()
	pk := timeline.ProcKey{PID: 8, StartTime: 2}
	tl.Procs[pk] = &timeline.ProcInfo{Key: pk, PPID: 7, Comm: "sh"}
	v := derive.New(tl)
	var doc struct {
		Processes []struct {
			PID     int             `json:"pid"`
			Threads json.RawMessage `json:"threads"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(jsonOf(t, Build(tl, v, nil, nil)), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range doc.Processes {
		if p.PID == 8 {
			found = true
			if string(p.Threads) != "[]" {
				t.Errorf("pid 8 threads: %s, want []", p.Threads)
			}
		}
	}
	if !found {
		t.Fatal("the thread-less process is not in the report")
	}
}
