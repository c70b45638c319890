package pysample

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// interpreters are the CPythons the live tests run on: every pyenv build
// of 3.8 to 3.13 this machine has, and Debian's own python3 (a static
// build: _PyRuntime in the executable). A missing one is skipped by name.
func interpreters(t *testing.T) map[string]string {
	out := map[string]string{}
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		root = "/root/.pyenv"
	}
	for minor := 8; minor <= 13; minor++ {
		name := "3." + strconv.Itoa(minor)
		ms, _ := filepath.Glob(filepath.Join(root, "versions", name+".*", "bin", "python"+name))
		sort.Strings(ms)
		if len(ms) > 0 {
			out["pyenv-"+name] = ms[len(ms)-1]
		} else {
			out["pyenv-"+name] = ""
		}
	}
	out["debian-python3"] = ""
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		out["debian-python3"] = "/usr/bin/python3"
	}
	return out
}

// markers maps "@name" comments of testdata/known.py to their lines.
func markers(t *testing.T) map[string]int {
	b, err := os.ReadFile("testdata/known.py")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	re := regexp.MustCompile(`# @([a-z-]+)`)
	for i, line := range strings.Split(string(b), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			out[m[1]] = i + 1
		}
	}
	return out
}

type known struct {
	cmd     *exec.Cmd
	tids    map[string]int
	version string
}

func startKnown(t *testing.T, python string, args ...string) *known {
	t.Helper()
	script, _ := filepath.Abs("testdata/known.py")
	cmd := exec.Command(python, append([]string{script}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	var ready struct {
		Ready   map[string]int `json:"ready"`
		Version string         `json:"version"`
	}
	select {
	case l := <-line:
		if err := json.Unmarshal([]byte(l), &ready); err != nil {
			t.Fatalf("%s: %q: %v", python, l, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start", python)
	}
	return &known{cmd: cmd, tids: ready.Ready, version: ready.Version}
}

// ours keeps the frames of known.py, as "function:line".
func ours(fr []profile.Frame) []string {
	var out []string
	for _, f := range fr {
		if strings.HasSuffix(f.File, "known.py") {
			out = append(out, f.Function+":"+strconv.Itoa(f.Line))
		}
	}
	return out
}

func TestKnownProgramEveryVersion(t *testing.T) {
	livetest.Need(t)
	mk := markers(t)
	want := map[string][]string{
		"main":   {"main_wait:" + strconv.Itoa(mk["main-sleep"]), "<module>:" + strconv.Itoa(mk["module-call"])},
		"nested": {"leaf:" + strconv.Itoa(mk["leaf-select"]), "middle:" + strconv.Itoa(mk["middle-call"]), "outer:" + strconv.Itoa(mk["outer-call"])},
		"gen":    {"gen:" + strconv.Itoa(mk["gen-sleep"]), "consume:" + strconv.Itoa(mk["consume-for"])},
		"spin":   {"spin:" + strconv.Itoa(mk["spin-loop"])},
	}
	pys := interpreters(t)
	names := make([]string, 0, len(pys))
	for n := range pys {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		python := pys[name]
		t.Run(name, func(t *testing.T) {
			if python == "" {
				t.Skipf("%s is not installed on this machine", name)
			}
			k := startKnown(t, python, "--spin")
			tg, err := Open(procfs.At("/proc", "/sys"), k.cmd.Process.Pid)
			if err != nil {
				t.Fatalf("%s (%s): %v", python, k.version, err)
			}
			if tg.Version() != k.version {
				t.Errorf("version %q, the interpreter says %q", tg.Version(), k.version)
			}
			// The program prints its thread ids just before its main thread
			// calls main_wait: read until it got there (a reader that reads
			// wrong never gets there).
			var p profile.Process
			for i := 0; i < 100; i++ {
				if p, err = tg.Dump(); err != nil {
					t.Fatal(err)
				}
				if len(p.Threads) > 0 && len(p.Threads[0].Frames) > 0 && p.Threads[0].Frames[0].Function == "main_wait" {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			byTID := map[int]profile.Thread{}
			for _, th := range p.Threads {
				byTID[th.TID] = th
			}
			if len(p.Threads) != 4 {
				t.Errorf("%d threads, want 4: %+v", len(p.Threads), p.Threads)
			}
			for role, tid := range k.tids {
				th, ok := byTID[tid]
				if !ok {
					t.Errorf("%s thread (tid %d) not found among %+v", role, tid, p.Threads)
					continue
				}
				// the spinning thread's line moves between the loop's
				// test and its body: both are the marked line or the next
				got := ours(th.Frames)
				if role == "spin" && len(got) == 1 && got[0] == "spin:"+strconv.Itoa(mk["spin-loop"]+1) {
					got = want[role]
				}
				if strings.Join(got, " ") != strings.Join(want[role], " ") {
					t.Errorf("%s thread: %v, want %v (all frames: %v)", role, got, want[role], th.Frames)
				}
				if role != "main" {
					if n := len(th.Frames); n == 0 || th.Frames[n-1].Function != "_bootstrap" || !strings.HasSuffix(th.Frames[n-1].File, "threading.py") {
						t.Errorf("%s thread's outermost frame: %v, want _bootstrap (threading.py)", role, th.Frames)
					}
				}
				if th.GIL() && (role == "nested" || role == "gen") {
					t.Errorf("%s thread: status %q; a thread sleeping in C cannot hold the GIL", role, th.Status)
				}
			}
			// The spinning thread holds the GIL whenever the main thread
			// (which just printed) has reached its sleep: within a few reads.
			holder := ""
			for i := 0; i < 50 && holder != "spin"; i++ {
				q, err := tg.Dump()
				if err != nil {
					t.Fatal(err)
				}
				for _, th := range q.Threads {
					if th.GIL() {
						holder = th.ID
						if th.TID == k.tids["spin"] {
							holder = "spin"
						}
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			if holder != "spin" {
				t.Errorf("the GIL holder was %q, not the spinning thread, over 50 reads", holder)
			}
			if t.Failed() {
				var sb strings.Builder
				_ = profile.FormatDump(&sb, []profile.Process{p})
				t.Log(sb.String())
			}
		})
	}
}

func TestNotPython(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	_, err := Open(procfs.At("/proc", "/sys"), cmd.Process.Pid)
	var np *NotPythonError
	if !errors.As(err, &np) {
		t.Fatalf("got %v, want a NotPythonError", err)
	}
}

// An interpreter whose layout the reader does not know is said to be
// unreadable by version; none is guessed at.
func TestUnknownVersionIsNotReadable(t *testing.T) {
	livetest.Need(t)
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		root = "/root/.pyenv"
	}
	ms, _ := filepath.Glob(filepath.Join(root, "versions", "3.7.*", "bin", "python3.7"))
	if len(ms) == 0 {
		t.Skip("CPython 3.7 (a version without a layout here) is not installed on this machine")
	}
	k := startKnown(t, ms[0])
	_, err := Open(procfs.At("/proc", "/sys"), k.cmd.Process.Pid)
	var le *LayoutError
	if !errors.As(err, &le) || err.Error() != "not readable: CPython 3.7 layout unknown" {
		t.Fatalf("got %v, want \"not readable: CPython 3.7 layout unknown\"", err)
	}
}

// A layout that does not match the interpreter (one offset off) yields a
// layout error, never a stack.
func TestWrongLayoutIsNotAStack(t *testing.T) {
	livetest.Need(t)
	python := interpreters(t)["pyenv-3.11"]
	if python == "" {
		t.Skip("pyenv-3.11 is not installed on this machine")
	}
	for _, c := range []struct {
		name   string
		break_ func(l *layout)
	}{
		{"code name", func(l *layout) { l.coName += 4 }},
		{"frame code", func(l *layout) { l.fCode += 8 }},
		{"thread interp", func(l *layout) { l.tsInterp += 8 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := startKnown(t, python)
			tg, err := Open(procfs.At("/proc", "/sys"), k.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			c.break_(&tg.w.l)
			tg.w.l.finalize()
			p, err := tg.Dump()
			var le *LayoutError
			if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), "not readable: CPython 3.11 layout unknown") {
				t.Fatalf("got %v (%+v), want a layout error", err, p.Threads)
			}
		})
	}
}
