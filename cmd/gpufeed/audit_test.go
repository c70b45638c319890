package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/livetest"
)

// What a sweep of bad input against the commands added after the first
// broken-input pass found: each case is run on the binary as a user would.

// -o takes only a format the command writes, and a format it does not
// write is refused before any work (a drill ran to its end before saying
// it could not write HTML; compare exited 3, "could not do its work").
func TestOutputFormatIsTheCommandsOwn(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "-o", "html", "/nonexistent-a", "/nonexistent-b"}, `gpufeed: -o/--output wants an output format: text or json; got "html"`},
		{[]string{"compare", "-o", "jsonl", "/nonexistent-a", "/nonexistent-b"}, `gpufeed: -o/--output wants an output format: text or json (-o jsonl streams a live run's intervals: diagnose, demo); got "jsonl"`},
		{[]string{"drill", "-o", "html", "jitter"}, `gpufeed: -o/--output wants an output format: text or json; got "html"`},
		{[]string{"drill", "-o", "JSONL", "syscalls"}, `gpufeed: -o/--output wants an output format: text or json (-o jsonl streams a live run's intervals: diagnose, demo); got "JSONL"`},
		{[]string{"check", "-o", "perfetto"}, `gpufeed: -o/--output wants an output format: text, json or html; got "perfetto"`},
	} {
		start := time.Now()
		_, stderr, code := run(t, tc.args...)
		if code != 2 || strings.TrimSpace(stderr) != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%v: refused after %v: the work ran first", tc.args, d)
		}
	}
	for cmd, want := range map[string]string{
		"compare":  "output format: text or json",
		"drill":    "output format: text or json",
		"check":    "output format: text, json or html",
		"report":   "output format: text, json or html",
		"trace":    "output format: text, json or html",
		"diagnose": "output format: text, json, html or jsonl",
		"demo":     "output format: text, json, html or jsonl",
	} {
		out, _, _ := run(t, cmd, "--help")
		if !strings.Contains(out, want+" (default text)") {
			t.Errorf("gpufeed %s --help: want %q in:\n%s", cmd, want, out)
		}
	}
}

// How long a drill observes is --duration, as in every other command, and
// a zero or negative one is refused (it was silently replaced by 5 s).
func TestDrillDurationIsChecked(t *testing.T) {
	for _, args := range [][]string{
		{"drill", "syscalls", "--duration", "0"},
		{"drill", "syscalls", "--duration", "-1s"},
		{"drill", "syscalls", "--window", "0"},
	} {
		_, stderr, code := run(t, args...)
		if code != 2 || !strings.Contains(stderr, "--duration 0s: want a positive duration") && !strings.Contains(stderr, "--duration -1s: want a positive duration") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a positive window asked for", args, code, stderr)
		}
	}
	out, _, _ := run(t, "drill", "--help")
	if !strings.Contains(out, "--duration duration") || strings.Contains(out, "--window") {
		t.Errorf("drill --help: want --duration and no --window:\n%s", out)
	}
}

// gpufeed pointed at itself (a shell that execs its last command gives it
// the shell's $$) is a usage error, exit 2, for diagnose and top alike.
func TestSelfAsTargetIsAUsageError(t *testing.T) {
	for _, command := range []string{
		`exec "$GPUFEED" diagnose --pid $$ --duration 2 --device none`,
		`exec "$GPUFEED" top --pid $$ --plain --device none`,
	} {
		cmd := exec.Command("bash", "-c", command)
		cmd.Env = append(os.Environ(), "GPUFEED="+gpufeed(t))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(stderr.String(), "is this gpufeed process itself") {
			t.Errorf("%s: exit %d, stderr %q; want 2", command, code, stderr.String())
		}
	}
}

// top --pid of a zombie says what it is (it has exited, its parent has not
// reaped it) and that nothing of it runs to watch, instead of one empty
// line and exit 0.
func TestTopZombieIsNamed(t *testing.T) {
	pid, parent := zombie(t)
	_, stderr, code := run(t, "top", "--pid", strconv.Itoa(pid), "--plain", "--device", "none")
	for _, want := range []string{"zombie", "pid " + strconv.Itoa(parent), "gpufeed diagnose --pid " + strconv.Itoa(pid)} {
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
		}
	}
}

// An attached target that exits ends top with a line saying so; stdout on
// /dev/null (a character device, not a terminal) gets the plain lines, not
// a full-screen view that cannot open a terminal.
func TestTopSaysTheTargetExited(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	target := exec.Command("sleep", "2.5")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Process.Kill(); target.Wait() })
	go target.Wait() // reaped as soon as it exits: top sees it gone
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd := exec.Command(gpufeed(t), "top", "--pid", strconv.Itoa(target.Process.Pid), "--device", "none", "--window", "2")
	cmd.Stdout = null
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("top did not end when its target exited")
	}
	if err != nil {
		t.Fatalf("top with stdout on /dev/null: %v, stderr %q", err, stderr.String())
	}
	want := "pid " + strconv.Itoa(target.Process.Pid) + " (sleep) exited"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q; want %q", stderr.String(), want)
	}
}

// A trace that holds no GPU operation has no analysed span: its scope's
// bounds are null, not the -1 the scope is built with.
func TestTraceScopeWithoutGPUWorkIsNull(t *testing.T) {
	path := t.TempDir() + "/cpu.json"
	if err := os.WriteFile(path, []byte(`{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":10,"dur":5}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, "trace", "-o", "json", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	validateSchema(t, out)
	var doc struct {
		Reports []struct {
			Scope map[string]any `json:"scope"`
		} `json:"reports"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Reports) != 1 {
		t.Fatalf("%v: %.300s", err, out)
	}
	for _, k := range []string{"start_ns", "end_ns"} {
		if v, ok := doc.Reports[0].Scope[k]; !ok || v != nil {
			t.Errorf("scope.%s = %v (present %v), want null", k, v, ok)
		}
	}
}

// compare given a profiler trace says it is one and where traces are read,
// instead of "expected a gpufeed-timeline header" (gzip) or "not one
// gpufeed wrote" (plain JSON).
func TestCompareNamesATrace(t *testing.T) {
	dir := t.TempDir()
	plain := dir + "/rank-0.json"
	if err := os.WriteFile(plain, []byte(`{"schemaVersion":1,"traceEvents":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	nsys := dir + "/report.sqlite"
	if err := os.WriteFile(nsys, append([]byte("SQLite format 3\x00"), make([]byte, 100)...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"../../testdata/traces/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", plain, nsys} {
		_, stderr, code := run(t, "compare", "testdata/trainer.gpufeed", tr)
		if code != 2 || !strings.Contains(stderr, "a profiler trace") || !strings.Contains(stderr, "gpufeed trace") {
			t.Errorf("compare RECORDING %s: exit %d, stderr %q; want 2, naming a profiler trace and gpufeed trace", tr, code, stderr)
		}
	}
}

// A value gpufeed cannot use is a usage error (exit 2) named once, before
// anything starts: --device bogus exited 3 with "--device bogus: --device
// "bogus": ..."; the agent took --pid -1 and --max-jobs 0 silently and ran,
// and --listen without a port exited 3.
func TestBadDeviceAndAgentValuesAreUsageErrors(t *testing.T) {
	const bogus = `gpufeed: --device "bogus": want auto, none, nvml or sim:PATH`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diagnose", "--pid", "1", "--duration", "2", "--device", "bogus"}, bogus},
		{[]string{"top", "--pid", "1", "--plain", "--device", "bogus"}, bogus},
		{[]string{"check", "--duration", "0", "--device", "bogus"}, bogus},
		{[]string{"agent", "--device", "bogus"}, bogus},
		{[]string{"diagnose", "--pid", "1", "--duration", "2", "--device", "sim:"}, "gpufeed: --device sim:PATH: the socket path is missing"},
		{[]string{"agent", "--pid", "-1", "--device", "none", "--listen", "127.0.0.1:0"}, "gpufeed: --pid -1: want a process id, a positive integer"},
		{[]string{"agent", "--max-jobs", "0", "--device", "none", "--listen", "127.0.0.1:0"}, "gpufeed: --max-jobs 0: want at least 1 process tree"},
		{[]string{"agent", "--device", "none", "--listen", "bad"}, "gpufeed: --listen bad: want host:port (e.g. 127.0.0.1:9847 or :9847)"},
		{[]string{"agent", "--device", "none", "--listen", "127.0.0.1:0", "--root", "/nonexistent"},
			"gpufeed: --root /nonexistent: no proc directory under it (mount the node's /proc at /nonexistent/proc): proc root: stat /nonexistent/proc: no such file or directory"},
		{[]string{"agent", "--device", "none", "--listen", "127.0.0.1:0", "--proc-root", "/nonexistent"},
			"gpufeed: --proc-root /nonexistent, --sys-root /sys: proc root: stat /nonexistent: no such file or directory"},
	} {
		r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: tc.args, Timeout: 30 * time.Second})
		if r.Code != 2 || strings.TrimSpace(r.Stderr) != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.Code, r.Stderr, tc.want)
		}
	}
}

// drill jitter --cpu names a CPU this process may run on, checked before the
// driver is loaded (999 exited 3 after loading it; -5 was taken as the
// default).
func TestDrillCPUIsChecked(t *testing.T) {
	for _, cpu := range []string{"999", "-5"} {
		_, stderr, code := run(t, "drill", "jitter", "--cpu", cpu)
		if code != 2 || !strings.Contains(stderr, "--cpu "+cpu+": ") || strings.Contains(stderr, "CUDA driver") {
			t.Errorf("--cpu %s: exit %d, stderr %q; want 2, naming --cpu, before any driver", cpu, code, stderr)
		}
	}
}

// Every short report ends with the whole line saying how to read more, at
// 80 columns too: it was cut in the middle of "what a finding means" at 80,
// and a directory of ranks cut it in the middle of "gpufeed explain" at 100.
func TestShortReportsEndWithTheWholeHint(t *testing.T) {
	const hint = "-v: evidence and tables; gpufeed explain ID: what a finding means"
	for _, args := range [][]string{
		{"trace", "../../testdata/traces/trace_filter"},
		{"report", "testdata/trainer.gpufeed"},
		{"trace", "../../testdata/traces/ns_resolution_trace"},
	} {
		for _, columns := range []string{"80", "100", "120"} {
			r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: args, Env: []string{"COLUMNS=" + columns}})
			lines := strings.Split(strings.TrimRight(r.Stdout, "\n"), "\n")
			if r.Code != 0 || lines[len(lines)-1] != hint {
				t.Errorf("%v COLUMNS=%s: exit %d, last line %q, want %q", args, columns, r.Code, lines[len(lines)-1], hint)
			}
		}
	}
}
