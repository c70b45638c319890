package profile

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func parseFile(t *testing.T, name string) []Process {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := ParsePySpy(f)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestRealDump(t *testing.T) {
	ps := parseFile(t, "uwsgi-idle.txt")
	if len(ps) != 1 || ps[0].PID != 25585 || ps[0].Python != "3.7.3" || !strings.HasSuffix(ps[0].Exe, "/bin/uwsgi") ||
		len(ps[0].Threads) != 1 || ps[0].Threads[0].TID != 25585 || ps[0].Threads[0].Name != "uWSGIWorker1Core0" || ps[0].Threads[0].Active() {
		t.Errorf("%+v", ps)
	}
}

func TestFutexHangDump(t *testing.T) {
	ps := parseFile(t, "futexhang.txt")
	if len(ps) != 1 || len(ps[0].Threads) != 5 {
		t.Fatalf("%+v", ps)
	}
	main := ps[0].Threads[0]
	if main.Name != "MainThread" || main.Frames[0].String() != "_wait_for_tstate_lock (threading.py:1132)" || main.Frames[2].Function != "<module>" {
		t.Errorf("%+v", main)
	}
	if h := ps[0].Threads[1]; len(h.Frames) != 4 {
		t.Errorf("locals must be skipped: %+v", h.Frames)
	}
	gil := ps[0].Threads[4]
	if gil.TID != 0 || gil.ID != "0x7F2A3B4C5700" || !gil.GIL() || !gil.Active() {
		t.Errorf("%+v", gil)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	for _, bad := range []string{
		"Thread 1 (idle)\n",
		"Process abc: x\n",
		"Process 1: x\n    frame without thread (x.py:1)\n",
		"Process 1: x\nThread 1 (idle)\n    no location\n",
		"Process 1: x\ngarbage\n",
	} {
		_, err := ParsePySpy(strings.NewReader(bad))
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "line ") || !strings.Contains(err.Error(), "expected") && !strings.Contains(err.Error(), "before") {
			t.Errorf("ParsePySpy(%q): %v", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"uwsgi-idle.txt", "futexhang.txt"} {
		b, _ := os.ReadFile("testdata/" + n)
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParsePySpy(strings.NewReader(s))
		if err != nil && !errors.Is(err, ErrSyntax) && !strings.Contains(err.Error(), "token too long") {
			t.Errorf("unexpected error kind: %v", err)
		}
		for _, p := range ps {
			if p.PID <= 0 {
				t.Errorf("pid %d", p.PID)
			}
			for _, th := range p.Threads {
				for _, fr := range th.Frames {
					if fr.Line < 0 {
						t.Errorf("line %d", fr.Line)
					}
				}
			}
		}
	})
}

// TestPySpyCommandLineScrubbed: py-spy's process line carries the
// process's command line; its secrets are scrubbed as /proc's are.
func TestPySpyCommandLineScrubbed(t *testing.T) {
	dump := "Process 4242: python train.py --password=hunter2 --hub-token hf_" + strings.Repeat("aB3", 12) + " --db postgres://u:pw@h/x\nPython v3.11.7 (/usr/bin/python3.11)\n"
	procs, err := ParsePySpy(strings.NewReader(dump))
	if err != nil || len(procs) != 1 {
		t.Fatalf("%v %+v", err, procs)
	}
	if want := "python train.py --password=*** --hub-token *** --db postgres://u:***@h/x"; procs[0].Cmdline != want {
		t.Errorf("cmdline %q, want %q", procs[0].Cmdline, want)
	}
}
