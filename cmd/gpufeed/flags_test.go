package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/agentcmd"
	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/livetest"
)

// The flags every command shares, their errors and the exit statuses, as a
// user meets them.

var checkServer = filepath.Join("..", "..", "testdata", "check", "server")

// parserText is what a Go parser says about a bad value: none of it may
// reach the user.
var parserText = regexp.MustCompile(`strconv\.|invalid argument|invalid syntax|time: |ParseInt|ParseFloat`)

// TestBadValuesSayWhatTheFlagWants: a value a flag cannot take is refused
// with one line naming the flag, what it wants and what it got, and exit
// status 2.
func TestBadValuesSayWhatTheFlagWants(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diagnose", "--pid", "abc"}, `gpufeed: --pid wants a process id, a positive integer; got "abc"`},
		{[]string{"diagnose", "--pid", "-4"}, `gpufeed: --pid wants a process id, a positive integer; got "-4"`},
		{[]string{"check", "--pid", "1x"}, `gpufeed: --pid wants a process id, a positive integer; got "1x"`},
		{[]string{"diagnose", "--pid", "1", "--duration", "ten"}, `gpufeed: --duration wants a duration: seconds (5, 2.5) or with a unit (500ms, 30s, 2m); got "ten"`},
		{[]string{"demo", "--interval", "fast"}, `gpufeed: --interval wants a duration: seconds (5, 2.5) or with a unit (500ms, 30s, 2m); got "fast"`},
		{[]string{"diagnose", "--pid", "1", "-o", "yaml"}, `gpufeed: -o/--output wants an output format: text, json, html or jsonl; got "yaml"`},
		{[]string{"report", "-o", "xml", "x"}, `gpufeed: -o/--output wants an output format: text, json or html; got "xml"`},
		{[]string{"check", "--fail-on", "error"}, `gpufeed: --fail-on wants one of fail, warn; got "error"`},
		{[]string{"trace", "--workers", "many", "x"}, `gpufeed: --workers wants an integer; got "many"`},
		{[]string{"diagnose", "--pid", "1", "--sched", "ebpf"}, `gpufeed: --sched ebpf: want auto, bpf or proc`},
		{[]string{"demo", "--sched", "kernel"}, `gpufeed: --sched kernel: want auto, bpf or proc`},
		{[]string{"simdev", "--pageable-factor", "half"}, `gpufeed: --pageable-factor wants a decimal number (0.5, 1e-2; not a hex float such as 0x1p-1); got "half"`},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != 2 || strings.TrimSpace(stderr) != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if parserText.MatchString(stderr) {
			t.Errorf("%v: a parser's message reaches the user: %q", tc.args, stderr)
		}
	}
}

// TestBareSecondsAndAnyCaseFormat: --duration 5 is five seconds (as in
// sleep and timeout), units still work, and -o JSON is -o json.
func TestBareSecondsAndAnyCaseFormat(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	for _, tc := range []struct {
		duration string
		want     float64
	}{{"0.25", 0.25}, {"2", 2}, {"1500ms", 1.5}, {"0", 0}} {
		out, stderr, code := run(t, "check", "--root", checkServer, "--device", "none", "--duration", tc.duration, "-o", "JSON")
		if code != 0 || stderr != "" {
			t.Fatalf("--duration %s: exit %d: %s", tc.duration, code, stderr)
		}
		var rep struct {
			WindowNS *int64 `json:"window_ns"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("-o JSON: not JSON: %v", err)
		}
		if rep.WindowNS == nil || float64(*rep.WindowNS) != tc.want*1e9 {
			t.Errorf("--duration %s: window %v ns, want %v s", tc.duration, rep.WindowNS, tc.want)
		}
	}
	out, stderr, code := run(t, "diagnose", "--root", hostRoot(t, "../../testdata/proc/trainer", ""),
		"--pid", "26627", "--duration", "2", "--interval", "0.1", "--device", "none", "-o", "Json")
	if code != 0 {
		t.Fatalf("diagnose --duration 2 -o Json: exit %d: %s", code, stderr)
	}
	var rep struct {
		Window struct {
			Requested string `json:"requested"`
		} `json:"window"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o Json: not JSON: %v\n%s", err, out)
	}
}

// TestUnrunnableFailsBeforeTheWindow: what cannot succeed is refused before
// the window starts, so a ten-minute window asked for with a mistake ends
// at once with the reason, no report and the usage (2) or runtime (3)
// status; diagnose -- COMMAND gives 125 and does not run the command.
func TestUnrunnableFailsBeforeTheWindow(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		args []string
		env  []string
		code int
		want string
	}{
		{[]string{"diagnose", "--pid", self, "--duration", "1"}, nil, 2,
			"--duration 1s: a verdict needs a window of at least 2s"},
		{[]string{"diagnose", "--pid", self, "--duration", "3", "--interval", "0.5"}, nil, 2,
			"--duration 3s holds 6 intervals of 500ms; a verdict needs at least 20: give a shorter --interval (at most 150ms) or a longer --duration (at least 10s)"},
		{[]string{"demo", "--duration", "1500ms"}, nil, 2, "a verdict needs a window of at least 2s"},
		{[]string{"diagnose", "--pid", "999999999", "--duration", "600"}, nil, 2, "--pid 999999999: no such process under /proc"},
		{[]string{"diagnose", "--pid", "2", "--duration", "600"}, nil, 2, "is a kernel thread"},
		{[]string{"diagnose", "--pid", self, "--duration", "600", "--record", "/nonexistent-dir/run.gpufeed"}, nil, 2,
			"--record /nonexistent-dir/run.gpufeed: its directory /nonexistent-dir does not exist"},
		{[]string{"diagnose", "--duration", "1", "--", "touch", marker}, nil, 125,
			"--duration 1s: a verdict needs a window of at least 2s"},
	} {
		r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: tc.args, Env: tc.env, Timeout: 60 * time.Second})
		if r.Code != tc.code || !strings.Contains(r.Stderr, tc.want) || !strings.HasPrefix(r.Stderr, "gpufeed: ") {
			t.Errorf("%v: exit %d, stderr %q; want %d saying %q", tc.args, r.Code, r.Stderr, tc.code, tc.want)
		}
		if r.Stdout != "" {
			t.Errorf("%v: a report was printed: %q", tc.args, r.Stdout)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("diagnose -- COMMAND ran the command although it refused the window")
	}
}

// TestExitStatuses: gpufeed's own failures (usage 2, runtime 3) are apart
// from a launched command's status, which diagnose -- COMMAND passes
// through; its own failure there is 125.
func TestExitStatuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"no-such-command"}, 2},
		{[]string{"diagnose", "--no-such-flag", "--pid", "1"}, 2},
		{[]string{"diagnose", "--no-such-flag", "--", "true"}, 125},
		{[]string{"diagnose", "--pid", "1", "--", "true"}, 125},
		{[]string{"diagnose", "--duration", "2", "--device", "none", "--", "sh", "-c", "exit 3"}, 3},
		{[]string{"diagnose", "--duration", "2", "--device", "none", "--", "sh", "-c", "exit 2"}, 2},
		{[]string{"diagnose", "--duration", "2", "--device", "none", "--", "sh", "-c", "kill -TERM $$"}, 128 + 15},
		{[]string{"diagnose", "--duration", "2", "--device", "none", "--", "gpufeed-no-such-program"}, 127},
		{[]string{"report", "testdata/does-not-exist.gpufeed"}, 2},
		{[]string{"demo", "no-such-scenario"}, 2},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d; stderr %q", tc.args, code, tc.code, stderr)
		}
	}
	// --device nvml where NVML cannot start: gpufeed could not do its work.
	out, stderr, code := run(t, "check", "--root", checkServer, "--device", "nvml", "--duration", "0")
	if code == 0 || code == 1 {
		t.Skipf("NVML starts on this machine (exit %d): %s", code, out)
	}
	if code != 3 || !strings.HasPrefix(stderr, "gpufeed: --device nvml: ") {
		t.Errorf("check --device nvml without NVML: exit %d, want 3; stderr %q", code, stderr)
	}
}

// TestHelpDocumentsExitStatuses: --help says what each status means.
func TestHelpDocumentsExitStatuses(t *testing.T) {
	out, _, code := run(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"Exit status:", "2    usage", "3    gpufeed could not do its work",
		"diagnose -- COMMAND exits with the command's own status", "is 125"} {
		if !strings.Contains(out, want) {
			t.Errorf("gpufeed --help lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = run(t, "check", "--help")
	for _, want := range []string{"--fail-on", "--require-gpu", "Exit status: 0 when no result is at least as severe as --fail-on"} {
		if !strings.Contains(out, want) {
			t.Errorf("gpufeed check --help lacks %q", want)
		}
	}
	out, _, _ = run(t, "diagnose", "--help")
	for _, want := range []string{"--root DIR", "exits 125", "(seconds, or with a unit: 500ms, 2m)"} {
		if !strings.Contains(out, want) {
			t.Errorf("gpufeed diagnose --help lacks %q", want)
		}
	}
	if strings.Contains(out, "--proc-root") || strings.Contains(out, "--sys-root") {
		t.Error("diagnose --help shows the deprecated --proc-root or --sys-root")
	}
}

// TestVersionFlag: -V and --version print the version and the commit.
func TestVersionFlag(t *testing.T) {
	for _, flag := range []string{"-V", "--version"} {
		out, stderr, code := run(t, flag)
		if code != 0 || stderr != "" || !regexp.MustCompile(`^gpufeed \S+ \((commit [0-9a-f]{7,}|no commit recorded)[^()]*\)\n$`).MatchString(out) {
			t.Errorf("gpufeed %s: exit %d, %q %q; want \"gpufeed VERSION (commit ...)\"", flag, code, out, stderr)
		}
	}
}

// TestDeprecatedSpellings: the old names (--window for check's --duration,
// --proc-root and --sys-root for --root) still work, are hidden from help,
// and each warns once.
func TestDeprecatedSpellings(t *testing.T) {
	now, _, _ := run(t, "check", "--root", checkServer, "--device", "none", "--duration", "0")
	old, stderr, code := run(t, "check", "--root", checkServer, "--device", "none", "--window", "0", "--window", "0")
	if code != 0 || old != now {
		t.Errorf("check --window 0: exit %d, output differs from --duration 0's", code)
	}
	if want := "gpufeed: warning: --window is deprecated: use --duration, the name every command gives how long gpufeed observes\n"; stderr != want {
		t.Errorf("check --window: stderr %q, want the one warning %q", stderr, want)
	}
	out, stderr, code := run(t, "diagnose", "--proc-root", "../../testdata/proc/trainer", "--sys-root", t.TempDir(),
		"--pid", "26627", "--duration", "2", "--device", "none", "-o", "json")
	if code != 0 || !json.Valid([]byte(out)) {
		t.Fatalf("diagnose --proc-root: exit %d: %s", code, stderr)
	}
	if strings.Count(stderr, "warning: --proc-root is deprecated: use --root DIR") != 1 ||
		strings.Count(stderr, "warning: --sys-root is deprecated: use --root DIR") != 1 || strings.Count(stderr, "\n") != 2 {
		t.Errorf("diagnose --proc-root --sys-root: stderr %q, want one warning for each", stderr)
	}
	help, _, _ := run(t, "check", "--help")
	if strings.Contains(help, "--window") {
		t.Error("check --help shows the deprecated --window")
	}
}

// TestCheckGates: --fail-on warn fails on a warning; --require-gpu fails a
// GPU node whose driver is missing (here: /dev/nvidia0 exists and NVML
// cannot load, as on this machine), which otherwise only warns.
func TestCheckGates(t *testing.T) {
	// powersave warns (the governor) and fails nothing.
	powersave := filepath.Join("..", "..", "testdata", "check", "powersave")
	for _, tc := range []struct {
		failOn string
		code   int
	}{{"", 0}, {"fail", 0}, {"warn", 1}, {"WARN", 1}} {
		args := []string{"check", "--root", powersave, "--device", "none", "--duration", "0", "-o", "json"}
		if tc.failOn != "" {
			args = append(args, "--fail-on", tc.failOn)
		}
		out, stderr, code := run(t, args...)
		var rep struct {
			ExitStatus int `json:"exit_status"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || code != tc.code || rep.ExitStatus != tc.code {
			t.Errorf("--fail-on %q: exit %d, exit_status %d, want %d (%v; %s)", tc.failOn, code, rep.ExitStatus, tc.code, err, stderr)
		}
	}

	// A GPU node: the server fixture's /proc, its device node, no sysfs,
	// and no NVIDIA library on this machine.
	host := hostRoot(t, filepath.Join(checkServer, "proc"), "")
	if err := os.MkdirAll(filepath.Join(host, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nvidia0", "nvidiactl", "nvidia-uvm"} {
		if err := os.WriteFile(filepath.Join(host, "dev", n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := run(t, "check", "--root", host, "--duration", "0", "--require-gpu")
	if strings.Contains(out, "gpu-driver") && regexp.MustCompile(`(?m)^\s*gpu-driver\s+.*answers`).MatchString(out) {
		t.Skip("this machine has a working NVIDIA driver")
	}
	if code != 1 {
		t.Errorf("--require-gpu on a node whose driver is missing: exit %d, want 1; stderr %q\n%s", code, stderr, out)
	}
	if !regexp.MustCompile(`FAIL\s+gpu-driver`).MatchString(out) || !strings.Contains(out, "1 GPU device node (/dev/nvidia0), but the driver cannot be used") {
		t.Errorf("--require-gpu: no failed gpu-driver result naming /dev/nvidia0:\n%s", out)
	}
	out, _, code = run(t, "check", "--root", host, "--duration", "0")
	if code != 0 || !regexp.MustCompile(`WARN\s+gpu-driver`).MatchString(out) {
		t.Errorf("without --require-gpu: exit %d, want 0 with a gpu-driver warning:\n%s", code, out)
	}
	// A node with no GPU at all fails --require-gpu too.
	bare := hostRoot(t, filepath.Join(checkServer, "proc"), "")
	out, _, code = run(t, "check", "--root", bare, "--duration", "0", "--require-gpu")
	if code != 1 || !strings.Contains(out, "no NVIDIA GPU on this host") {
		t.Errorf("--require-gpu with no GPU: exit %d, want 1 saying there is none:\n%s", code, out)
	}
	if _, stderr, code := run(t, "check", "--require-gpu", "--device", "none"); code != 2 || !strings.Contains(stderr, "--require-gpu asks for a GPU and --device none for none") {
		t.Errorf("--require-gpu --device none: exit %d, %q; want 2", code, stderr)
	}
}

// TestSamplerDocExitStatuses: the bad values docs/SAMPLER.md lists for
// diagnose exit as its table says: 2 with --pid, 125 with -- CMD (gpufeed's
// own failure, never a status of the command; the README's exit statuses).
// The table said 2 for both.
func TestSamplerDocExitStatuses(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "SAMPLER.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		row  string // the table row's first cell
		args []string
	}{
		{"| `--interval 1us` |", []string{"--interval", "1us"}},
		{"| `--interval 10s --duration 2s` |", []string{"--interval", "10s", "--duration", "2s"}},
		{"| `--duration 0`, `-o xml`, `--pid -3` |", []string{"--duration", "0"}},
		{"| `--device bogus`, `--device sim:` |", []string{"--device", "bogus"}},
	} {
		var row string
		for _, l := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(l, tc.row) {
				row = l
			}
		}
		if !strings.HasSuffix(row, "| 2 (125 with `-- CMD`) |") {
			t.Errorf("SAMPLER.md's row %s says %q; want exit 2, 125 with -- CMD", tc.row, row)
		}
		if _, stderr, code := run(t, append(append([]string{"diagnose"}, tc.args...), "--pid", "1")...); code != 2 {
			t.Errorf("diagnose %v --pid 1: exit %d, want 2 (%s)", tc.args, code, stderr)
		}
		if _, stderr, code := run(t, append(append([]string{"diagnose"}, tc.args...), "--", "true")...); code != 125 {
			t.Errorf("diagnose %v -- true: exit %d, want 125 (%s)", tc.args, code, stderr)
		}
	}
}

// TestRootFlagOneMeaning: every command that takes --root (the host's /
// mounted at DIR) defines it the one way, with one help text, and reads
// the same paths under it (agentcmd.UnderRoot): diagnose and top read
// /proc and /sys there, check /dev too, and diagnose the kernel log at
// DIR/dev/kmsg as the agent does. They had three help texts, and diagnose
// read the container's own /dev/kmsg under --root.
func TestRootFlagOneMeaning(t *testing.T) {
	root := newRootCmd()
	n := 0
	for _, c := range root.Commands() {
		f := c.Flags().Lookup("root")
		if f == nil {
			continue
		}
		n++
		if f.Usage != agentcmd.RootUsage || f.DefValue != "" {
			t.Errorf("%s --root: %q (default %q), want the one help text", c.Name(), f.Usage, f.DefValue)
		}
	}
	if n < 4 {
		t.Errorf("%d commands take --root, want diagnose, top, check and agent", n)
	}
	if got, want := agentcmd.UnderRoot("/host"), (agentcmd.RootPaths{Proc: "/host/proc", Sys: "/host/sys", Dev: "/host/dev", Kmsg: "/host/dev/kmsg", Host: "/host"}); got != want {
		t.Errorf("UnderRoot(/host) = %+v, want %+v", got, want)
	}
	if got, want := agentcmd.UnderRoot(""), (agentcmd.RootPaths{Proc: "/proc", Sys: "/sys", Dev: "/dev", Kmsg: "/dev/kmsg", Host: "/"}); got != want {
		t.Errorf("UnderRoot(\"\") = %+v, want %+v", got, want)
	}
}
