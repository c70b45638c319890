package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/render"
)

// Broken input and hostile processes against every command, run as a user
// would run them: the binary, real processes, real files.

// decodeReport parses diagnose's stdout, which must be the report alone.
func decodeReport(t *testing.T, stdout string) render.Report {
	t.Helper()
	var r render.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("stdout is not the JSON report (%v):\n%.300s", err, stdout)
	}
	return r
}

// The launched command's output never mixes with the report: stdout is the
// report's, the command's output goes to stderr, or to --cmd-output FILE.
func TestDiagnoseStdoutIsTheReport(t *testing.T) {
	cmdline := []string{"sh", "-c", "echo to-stdout; echo to-stderr >&2"}
	out, stderr, code := run(t, append([]string{"diagnose", "-o", "json", "--duration", "2s", "--device", "none", "--"}, cmdline...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	decodeReport(t, out)
	if !strings.Contains(stderr, "to-stdout") || !strings.Contains(stderr, "to-stderr") {
		t.Errorf("the command's output is not on stderr: %q", stderr)
	}

	file := filepath.Join(t.TempDir(), "cmd.log")
	out, stderr, code = run(t, append([]string{"diagnose", "-o", "json", "--duration", "2s", "--device", "none", "--cmd-output", file, "--"}, cmdline...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	decodeReport(t, out)
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "to-stdout") || !strings.Contains(string(b), "to-stderr") {
		t.Errorf("--cmd-output holds %q (%v)", b, err)
	}
	if strings.Contains(stderr, "to-std") {
		t.Errorf("with --cmd-output the command's output still reached stderr: %q", stderr)
	}
	if _, stderr, code := run(t, "diagnose", "--duration", "2s", "--cmd-output", file, "--pid", "1"); code != 2 || !strings.Contains(stderr, "--cmd-output") {
		t.Errorf("--cmd-output with --pid: exit %d, %q", code, stderr)
	}
}

// A command that cannot be run exits as a shell would: 127 when it is not
// found, 126 when it is found but cannot be executed.
func TestDiagnoseCommandNotFoundOrNotExecutable(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "data.txt")
	os.WriteFile(plain, []byte("not a program\n"), 0o644)
	for _, tc := range []struct {
		cmd  string
		code int
		say  string
	}{
		{"gpufeed-no-such-command", 127, "not found"},
		{filepath.Join(dir, "missing"), 127, "not found"},
		{plain, 126, "not executable"},
		{dir, 126, "not executable"},
	} {
		_, stderr, code := run(t, "diagnose", "--duration", "2s", "--", tc.cmd, "arg")
		if code != tc.code || !strings.Contains(stderr, tc.say) || !strings.Contains(stderr, tc.cmd) {
			t.Errorf("%s: exit %d, stderr %q; want %d saying %q", tc.cmd, code, stderr, tc.code, tc.say)
		}
	}
}

// A dataset path that does not exist is a usage error, not a local
// filesystem.
func TestCheckDataPathMustExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dataset")
	out, stderr, code := run(t, "check", "--duration", "0", "--device", "none", "--data", missing)
	if code != 2 || !strings.Contains(stderr, missing) || !strings.Contains(stderr, "does not exist") {
		t.Errorf("exit %d, stderr %q, stdout %.200q", code, stderr, out)
	}
	_, stderr, code = run(t, "check", "--duration", "0", "--device", "none", "--data", t.TempDir())
	if code != 0 {
		t.Errorf("an existing directory: exit %d: %s", code, stderr)
	}
}

// kernelThread finds a kernel thread (PF_KTHREAD in stat's flags).
func kernelThread(t *testing.T) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 6 {
			if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&0x00200000 != 0 {
				return pid
			}
		}
	}
	t.Skip("no kernel thread visible (a pid namespace hides them)")
	return 0
}

// zombie starts a process whose child has exited and is never reaped; it
// returns the zombie's pid and its parent's.
func zombie(t *testing.T) (int, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 0.1 & exec sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	parent := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			s := string(st)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(parent) {
				pid, _ := strconv.Atoi(e.Name())
				return pid, parent
			}
		}
	}
	t.Fatal("no zombie appeared")
	return 0, 0
}

// A kernel thread is named as such: there is nothing of it to diagnose.
func TestKernelThreadIsNamed(t *testing.T) {
	pid := kernelThread(t)
	for _, args := range [][]string{
		{"diagnose", "--pid", strconv.Itoa(pid), "--duration", "2s"},
		{"check", "--pid", strconv.Itoa(pid), "--duration", "0", "--device", "none"},
	} {
		_, stderr, code := run(t, args...)
		if code != 2 || !strings.Contains(stderr, "kernel thread") || strings.Contains(stderr, "no process") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// A zombie is named (exited, not reaped by its parent) and what can still be
// read is: its exit status, its parent, the kernel log since it started, the
// platform. check asks nobody to report a bug.
func TestZombieIsDiagnosedAsFarAsItCanBe(t *testing.T) {
	pid, parent := zombie(t)
	out, stderr, code := run(t, "diagnose", "--pid", strconv.Itoa(pid), "--duration", "2s", "--device", "none", "-o", "json")
	if code != 0 {
		t.Fatalf("diagnose: exit %d, %s", code, stderr)
	}
	r := decodeReport(t, out)
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{"zombie", "pid " + strconv.Itoa(parent), "has not reaped it", "exit status 0"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
	if r.Target.ExitCode == nil || *r.Target.ExitCode != 0 {
		t.Errorf("exit code %v, want the zombie's 0", r.Target.ExitCode)
	}
	// The verdict says the process had already exited when gpufeed came,
	// not that it exited after 0 s, nor to attach to a longer-running job.
	if m := r.Verdict.Missing; !strings.Contains(m, "had already exited when gpufeed attached") || strings.Contains(m, "exited after") {
		t.Errorf("verdict's missing part %q: want it to say the process had already exited when gpufeed attached", m)
	}

	out, stderr, code = run(t, "check", "--pid", strconv.Itoa(pid), "--duration", "0", "--device", "none", "-o", "json")
	if code != 0 {
		t.Fatalf("check: exit %d, %s", code, stderr)
	}
	var rep render.CheckReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	sawZombie := false
	for _, res := range rep.Results {
		if res.Status == check.Error {
			t.Errorf("%s: error result %q (%s)", res.ID, res.Claim, res.Need)
		}
		if strings.Contains(res.Claim, "zombie") {
			sawZombie = true
		}
	}
	if !sawZombie {
		t.Error("no result says the target is a zombie")
	}
}

// gpufeed run from inside the job it watches (and the timeout that runs it)
// is never counted as part of the job.
func TestObserverIsNotPartOfTheJob(t *testing.T) {
	livetest.Need(t)
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout(1)")
	}
	script := `timeout 60 "$GPUFEED" diagnose --pid $$ --duration 2 --device none -o json; true`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "GPUFEED="+gpufeed(t))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	r := decodeReport(t, string(out))
	for _, p := range r.Processes {
		if p.PID != r.Target.PID {
			t.Errorf("pid %d (%s, %s) counted as part of the job", p.PID, p.Comm, p.Role)
		}
	}
	for _, f := range r.Findings {
		if strings.Contains(f.Claim, "worker") {
			t.Errorf("finding %s: %s", f.ID, f.Claim)
		}
	}
	if !strings.Contains(strings.Join(r.Notes, " "), "observer") {
		t.Errorf("the report does not say the observer was left out: %q", r.Notes)
	}
	// bash only waits for its child, gpufeed: nothing of the job runs, and
	// that is no frozen job (it read CRITICAL job-stalled).
	if v := r.Verdict; v == nil || v.Class != finding.Idle || !strings.Contains(v.Summary, "gpufeed itself") {
		t.Errorf("verdict %+v: want idle, waiting for gpufeed itself", v)
	}
	for _, f := range r.Findings {
		if f.Severity == finding.Critical {
			t.Errorf("critical finding %s about a shell waiting for gpufeed: %s", f.ID, f.Claim)
		}
	}
}

// A requested 2 s window of a running job, attached to repeatedly (three
// observers at once), is judged every time.
func TestTwoSecondWindowIsJudged(t *testing.T) {
	livetest.Need(t)
	job := exec.Command("sh", "-c", "while :; do :; done")
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Process.Kill(); job.Wait() })
	for _, r := range diagnoseJSONAtOnce(t, []string{"2s", "2s", "2s"}, "--pid", strconv.Itoa(job.Process.Pid), "--device", "none") {
		if r.Verdict == nil || strings.Contains(r.Verdict.Missing, "observe at least") {
			t.Errorf("window %s: verdict %+v", time.Duration(r.Window.DurationNS), r.Verdict)
		}
	}
}

// The sampling interval has a floor and never exceeds the window.
func TestIntervalIsBounded(t *testing.T) {
	for _, tc := range []struct {
		args []string
		say  string
	}{
		{[]string{"diagnose", "--pid", "1", "--interval", "1us"}, "at least 10ms"},
		{[]string{"diagnose", "--pid", "1", "--interval", "10s", "--duration", "2s"}, "longer than --duration"},
		{[]string{"demo", "--interval", "1ms"}, "at least 10ms"},
		{[]string{"demo", "--interval", "3s", "--duration", "2s"}, "longer than --duration"},
	} {
		_, stderr, code := run(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.say) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", tc.args, code, stderr, tc.say)
		}
	}
}

// Names with line separators or bidirectional overrides reach no terminal
// as they are: not in errors on stderr, not in a report of a recording.
func TestHostileNamesInErrorsAreEscaped(t *testing.T) {
	name := filepath.Join(t.TempDir(), "rec\u202eexe.txt\u2028forged")
	for _, args := range [][]string{{"report", name}, {"trace", name}, {"check", "--data", name}} {
		_, stderr, code := run(t, args...)
		if code == 0 || strings.ContainsAny(stderr, "\u202e\u2028") || !strings.Contains(stderr, `rec\xe2\x80\xaeexe.txt`) {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// A process that names itself with a right-to-left override and a line
// separator is shown escaped in diagnose's text and JSON.
func TestHostileProcessNameIsNotShownRaw(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	job := exec.Command("sh", "-c", `printf 'x\342\200\256gpj.exe\342\200\250' > /proc/$$/comm; sleep 30; true`)
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Process.Kill(); job.Wait() })
	time.Sleep(200 * time.Millisecond)
	for _, format := range []string{"text", "json"} {
		out, stderr, code := run(t, "diagnose", "--pid", strconv.Itoa(job.Process.Pid), "--duration", "2s", "--device", "none", "-o", format)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if strings.ContainsAny(out, "\u202e\u2028") {
			t.Errorf("-o %s shows the name raw", format)
		}
	}
}

// copyTree copies a fixture tree (files, directories, links).
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if d.Type()&os.ModeSymlink != 0 {
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, dst)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Garbage in the files check reads (a corrupt fixture, a hostile container
// root) gives errors naming the file, with short lines: what is quoted of
// the garbage is capped, and no message says the same thing twice.
func TestCheckGarbageFixturePrintsShortLines(t *testing.T) {
	root := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "testdata", "check", "server"), root)
	garbage := strings.Repeat(`}{"\u202e x=y:z 12 kB garbage`, 200) // about 5 KB
	for _, f := range []string{"proc/meminfo", "proc/interrupts", "proc/4000/limits", "proc/4000/mountinfo", "proc/uptime", "proc/cmdline", "proc/4000/status"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(garbage+"\n"+garbage+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := run(t, "check", "--root", root, "--device", "none", "--duration", "0", "--pid", "4000")
	if code == 2 {
		t.Fatalf("exit 2: %s", stderr)
	}
	errors := 0
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 400 {
			t.Errorf("a %d-byte line: %.120s...", len(line), line)
		}
		if strings.Contains(line, "error parsing file: error parsing file") {
			t.Errorf("doubled prefix: %.200s", line)
		}
		if strings.HasPrefix(line, "ERROR") {
			errors++
		}
	}
	if errors == 0 || strings.Contains(out, "\u202e") {
		t.Errorf("%d errors reported, output:\n%.2000s", errors, out)
	}
}
