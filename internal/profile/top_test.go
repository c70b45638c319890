package profile

import (
	"errors"
	"strings"
	"testing"
)

func sampleTop() PySamples {
	return PySamples{PID: 10, Python: "3.11.2", Reader: "r", RateHz: 50, Rounds: 100, Seconds: 2,
		Threads: []PySampleThread{{TID: 10, Name: "python3", Samples: 100, Active: 40, GIL: 30, Other: 5,
			Stacks: []PySampleStack{
				{Frames: []Frame{{Function: "__next__", File: "/x/torch/utils/data/dataloader.py"}, {Function: "main", File: "train.py"}}, Samples: 60, Active: 10},
				{Frames: []Frame{{Function: "step", File: "/x/torch/optim/sgd.py"}, {Function: "wrapper", File: "/x/torch/optim/optimizer.py"}, {Function: "step", File: "/x/torch/optim/sgd.py"}, {Function: "main", File: "train.py"}}, Samples: 35, Active: 30},
			},
			Lines: []PySampleLine{{Function: "main", File: "train.py", Line: 7, Source: "loss.item()", Samples: 35, Active: 30}}}}}
}

func TestTopShares(t *testing.T) {
	th := sampleTop().Threads[0]
	if s := th.Share(func(f Frame) bool { return strings.Contains(f.File, "/torch/optim/") }); s.Samples != 35 || s.Active != 30 || s.Of != 100 {
		t.Errorf("optimizer share %+v: a nested match counts once per sample", s)
	}
	fs := th.FunctionShares()
	if fs[0].Function != "main" || fs[0].Total != 95 || fs[0].Own != 0 {
		t.Errorf("%+v", fs[0])
	}
	for _, f := range fs {
		if f.Function == "step" && (f.Total != 35 || f.Own != 35) {
			t.Errorf("step counted twice in one stack: %+v", f)
		}
	}
}

func TestParseTopChecksCounts(t *testing.T) {
	good, err := FormatPySamples(sampleTop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePySamples(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		strings.Replace(good, `"samples":60`, `"samples":600`, 1), // more than the thread's
		strings.Replace(good, `"active":40`, `"active":400`, 1),   // active above samples
		strings.Replace(good, `"pid":10`, `"pid":-1`, 1),
		good[:len(good)/2], // truncated
	} {
		if _, err := ParsePySamples(bad); !errors.Is(err, ErrPySamples) {
			t.Errorf("ParsePySamples accepted %q: %v", bad, err)
		}
	}
}

func TestFormatDumpRoundTrip(t *testing.T) {
	ps := []Process{{PID: 5, Cmdline: "python3 train.py", Python: "3.12.1", Exe: "/usr/bin/python3.12", Reader: "built-in", Skipped: 2,
		Threads: []Thread{{ID: "5", TID: 5, Name: "python3", Status: "active+gil", Frames: []Frame{{Function: "f", File: "a b.py", Line: 3}, {Function: "<module>", File: "a b.py", Line: 9}}},
			{ID: "0X7F00", Status: "idle", Frames: []Frame{{Function: "g (x)", File: "c.py"}}}}}}
	var sb strings.Builder
	if err := FormatDump(&sb, ps); err != nil {
		t.Fatal(err)
	}
	back, err := ParsePySpy(strings.NewReader(sb.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, sb.String())
	}
	if len(back) != 1 || back[0].Reader != "built-in" || back[0].Skipped != 2 || len(back[0].Threads) != 2 ||
		back[0].Threads[0].Frames[1].String() != "<module> (a b.py:9)" || back[0].Threads[1].Frames[0].Function != "g (x)" || !back[0].Threads[0].GIL() {
		t.Errorf("%+v\n%s", back, sb.String())
	}
}

func FuzzParseTop(f *testing.F) {
	good, _ := FormatPySamples(sampleTop())
	f.Add(good)
	f.Add(`{"pid":1,"rounds":1,"threads":[{"tid":1,"samples":1,"stacks":[{"frames":[],"samples":1}]}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		top, err := ParsePySamples(s)
		if err != nil {
			if !errors.Is(err, ErrPySamples) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		for _, th := range top.Threads {
			s := th.Share(func(Frame) bool { return true })
			if s.Samples > th.Samples || s.Active > th.Active {
				t.Fatalf("share %+v above the thread's %d/%d", s, th.Samples, th.Active)
			}
			for _, fs := range th.FunctionShares() {
				if fs.Own > fs.Total || fs.Total > th.Samples {
					t.Fatalf("%+v of %d", fs, th.Samples)
				}
			}
		}
	})
}

// FuzzFormatDump: whatever names a target's memory held, the dump text
// written reads back with the same number of threads and frames.
func FuzzFormatDump(f *testing.F) {
	f.Add("main", "train.py", "python3", 3)
	f.Add("a\nb", "x (y).py", "Thread 1 (idle)", 0)
	f.Fuzz(func(t *testing.T, fn, file, name string, line int) {
		if line < 0 {
			line = -line
		}
		ps := []Process{{PID: 1, Threads: []Thread{{ID: "1", TID: 1, Name: name, Status: "idle", Frames: []Frame{{Function: fn, File: file, Line: line}}}}}}
		var sb strings.Builder
		_ = FormatDump(&sb, ps)
		back, err := ParsePySpy(strings.NewReader(sb.String()))
		if err != nil {
			t.Fatalf("%q: %v", sb.String(), err)
		}
		if len(back) != 1 || len(back[0].Threads) != 1 || len(back[0].Threads[0].Frames) != 1 {
			t.Fatalf("%q -> %+v", sb.String(), back)
		}
	})
}
