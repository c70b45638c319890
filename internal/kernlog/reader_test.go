package kernlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeRunner answers commands from a table; a missing command is "not installed".
type fakeRunner struct {
	out   map[string]string
	fail  map[string]error
	calls []string
}

func (f *fakeRunner) run(_ context.Context, name string, args ...string) (io.ReadCloser, error) {
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	if err, ok := f.fail[name]; ok {
		return nil, err
	}
	out, ok := f.out[name]
	if !ok {
		return nil, fmt.Errorf("%s: not installed: %w", name, exec.ErrNotFound)
	}
	return io.NopCloser(strings.NewReader(out)), nil
}

func TestReadFixtureFile(t *testing.T) {
	r := &Reader{Path: "testdata/kmsg/local/local-6.18.kmsg", NoFallback: true, BootTime: fixedBoot}
	log, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if log.Source != r.Path || len(log.Entries) != 86-countDictLines(t, r.Path) || log.Dropped != 0 || log.Truncated {
		t.Errorf("source %s entries %d dropped %d truncated %v", log.Source, len(log.Entries), log.Dropped, log.Truncated)
	}
	last := log.Entries[len(log.Entries)-1]
	if !strings.HasPrefix(last.Message, "Memory cgroup out of memory: Killed process 17086") || !last.Wall.Equal(bootAt.Add(last.Mono)) {
		t.Errorf("last entry %+v", last)
	}
}

func countDictLines(t *testing.T, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, " ") {
			n++
		}
	}
	return n
}

func TestReadCapsKeepNewest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kmsg")
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "6,%d,%d,-;message %d\n SUBSYSTEM=x\n", i, i*1000000, i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Reader{Path: path, NoFallback: true, MaxRecords: 10, BootTime: fixedBoot}
	log, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 10 || log.Dropped != 90 || log.Entries[0].Message != "message 90" || log.Entries[9].Message != "message 99" {
		t.Errorf("kept %d (first %q), dropped %d", len(log.Entries), log.Entries[0].Message, log.Dropped)
	}
	r = &Reader{Path: path, NoFallback: true, Since: 95 * time.Second, BootTime: fixedBoot}
	if log, _ = r.Read(t.Context()); len(log.Entries) != 5 || log.Entries[0].Message != "message 95" {
		t.Errorf("since 95 s: kept %d", len(log.Entries))
	}
	r = &Reader{Path: path, NoFallback: true, MaxBytes: 200, BootTime: fixedBoot}
	if log, _ = r.Read(t.Context()); !log.Truncated || len(log.Entries) == 0 || len(log.Entries) > 10 {
		t.Errorf("200-byte cap: truncated %v, %d entries", log.Truncated, len(log.Entries))
	}
}

func TestReadSkipsBadRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, []byte("6,1,1,-;good\ngarbage\n6,x,1,-;bad seq\n6,3,3,-;good again\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := (&Reader{Path: path, NoFallback: true, BootTime: fixedBoot}).Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 2 || log.Skipped != 2 {
		t.Errorf("entries %d skipped %d", len(log.Entries), log.Skipped)
	}
}

func TestFallbackToDmesg(t *testing.T) {
	f := &fakeRunner{out: map[string]string{
		"dmesg": "<4>[  404.303575] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n" +
			"<3>[  404.307589] Memory cgroup out of memory: Killed process 10830 (python3) total-vm:78064kB, anon-rss:65152kB, file-rss:6296kB, shmem-rss:0kB, UID:0 pgtables:188kB oom_score_adj:0\n",
	}}
	r := &Reader{Path: filepath.Join(t.TempDir(), "absent"), Run: f.run, BootTime: fixedBoot}
	log, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if log.Source != "dmesg --raw" || len(log.Failed) != 1 || !strings.Contains(log.Failed[0].Err.Error(), "does not exist") {
		t.Errorf("source %q failed %v", log.Source, log.Failed)
	}
	kills := Kills(Events(log.Entries))
	if len(kills) != 1 || kills[0].PID != 10830 || !kills[0].Wall.Equal(bootAt.Add(404307589*time.Microsecond)) || log.Entries[1].Level != 3 {
		t.Errorf("kills %+v", kills)
	}
}

// TestFallbackQuietSinceStart: dmesg printed the kernel log, none of it
// since the job started (Since): the log is read and empty, not a failure
// (the agent in a container, reading through dmesg, failed its
// end-of-window probe every window of a quiet kernel).
func TestFallbackQuietSinceStart(t *testing.T) {
	f := &fakeRunner{out: map[string]string{"dmesg": "<6>[   10.000000] eth0: link up\n<6>[   20.000000] usb 1-1: new device\n"}}
	r := &Reader{Path: filepath.Join(t.TempDir(), "absent"), Run: f.run, BootTime: fixedBoot, Since: 30 * time.Second}
	log, err := r.Read(t.Context())
	if err != nil {
		t.Fatalf("a kernel log quiet since the job started: %v", err)
	}
	if log.Source != "dmesg --raw" || len(log.Entries) != 0 {
		t.Errorf("source %q, %d entries: want dmesg's, none since the start", log.Source, len(log.Entries))
	}
	// A command that printed no message at all is still a failure.
	f = &fakeRunner{out: map[string]string{"dmesg": "\n"}}
	if _, err := (&Reader{Path: filepath.Join(t.TempDir(), "absent"), Run: f.run, BootTime: fixedBoot}).Read(t.Context()); err == nil || !strings.Contains(err.Error(), "printed no kernel messages") {
		t.Errorf("dmesg printing nothing: %v, want it said", err)
	}
}

func TestFallbackToJournal(t *testing.T) {
	f := &fakeRunner{
		fail: map[string]error{"dmesg": errors.New("dmesg: read kernel buffer failed: Operation not permitted")},
		out: map[string]string{
			"journalctl": "[  518.050606] host kernel: Out of memory: Killed process 15784 (python3) total-vm:11964kB, anon-rss:4288kB, file-rss:3028kB, shmem-rss:0kB\n",
		},
	}
	r := &Reader{Path: filepath.Join(t.TempDir(), "absent"), Run: f.run, BootTime: fixedBoot, MaxRecords: 500}
	log, err := r.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if log.Source != "journalctl -k" || len(log.Failed) != 2 {
		t.Errorf("source %q failed %v", log.Source, log.Failed)
	}
	if len(f.calls) != 2 || !strings.Contains(f.calls[1], "-n 500") || !strings.Contains(f.calls[1], "short-monotonic") {
		t.Errorf("journalctl must be bounded and monotonic: %v", f.calls)
	}
	if ev, ok := first(Events(log.Entries), OOMKill); !ok || ev.PID != 15784 || ev.Mono != 518050606*time.Microsecond {
		t.Errorf("%+v", ev)
	}
}

func TestNoSourceSaysWhy(t *testing.T) {
	f := &fakeRunner{}
	_, err := (&Reader{Path: filepath.Join(t.TempDir(), "absent"), Run: f.run}).Read(t.Context())
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"does not exist", "dmesg: not installed", "journalctl: not installed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestDeniedIsNotVisible(t *testing.T) {
	if err := describeOpenError("/dev/kmsg", syscall.EPERM); !errors.Is(err, ErrNotVisible) || !strings.Contains(err.Error(), "CAP_SYSLOG") {
		t.Errorf("EPERM: %v", err)
	}
}

// TestExecRunnerBounded checks that the real runner returns a command's
// output and that closing early ends a command that would run forever.
func TestExecRunnerBounded(t *testing.T) {
	out, err := ExecRunner(t.Context(), "sh", "-c", "echo '[    1.000000] hello'; exec sleep 60")
	if err != nil {
		t.Skip("no sh:", err)
	}
	buf := make([]byte, 32)
	n, _ := io.ReadAtLeast(out, buf, 5)
	if !strings.Contains(string(buf[:n]), "hello") {
		t.Errorf("read %q", buf[:n])
	}
	done := make(chan error, 1)
	go func() { done <- out.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("closing a command we ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the command")
	}
	if _, err := ExecRunner(t.Context(), "gpufeed-no-such-command"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing command: %v", err)
	}
	out, _ = ExecRunner(t.Context(), "sh", "-c", "echo oops >&2; exit 3")
	_, _ = io.ReadAll(out)
	if err := out.Close(); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("a failing command's error should carry its stderr: %v", err)
	}
}

// TestReadLiveKmsg reads the machine's own kernel log: it must return
// (EAGAIN ends the read) and every record must parse.
func TestReadLiveKmsg(t *testing.T) {
	fd, err := syscall.Open(DefaultPath, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Skipf("%s not readable here: %v", DefaultPath, err)
	}
	syscall.Close(fd)
	done := make(chan struct{})
	var log *Log
	go func() {
		defer close(done)
		log, err = (&Reader{NoFallback: true}).Read(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("reading /dev/kmsg did not return: the read must stop at EAGAIN")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) == 0 || log.Skipped != 0 || log.BootTime.IsZero() {
		t.Errorf("entries %d skipped %d boot %s", len(log.Entries), log.Skipped, log.BootTime)
	}
	lastWall := log.Entries[len(log.Entries)-1].Wall
	if lastWall.After(time.Now().Add(time.Second)) || lastWall.Before(log.BootTime) {
		t.Errorf("last record's wall time %s is not between boot %s and now", lastWall, log.BootTime)
	}
}

// The failed attempts are said on one line, each still matched by
// errors.Is: a report escapes a newline inside a claim as "\x0a".
func TestFailedAttemptsOnOneLine(t *testing.T) {
	err := joinAttempts([]Attempt{
		{Source: "/dev/kmsg", Err: describeOpenError("/dev/kmsg", syscall.EPERM)},
		{Source: "dmesg", Err: errors.New("dmesg: exit status 1: read kernel buffer failed")},
	})
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error on several lines: %q", err)
	}
	want := "kernel log: no source could be read: /dev/kmsg: kernel log not visible: needs CAP_SYSLOG or root (kernel.dmesg_restrict=1); dmesg: exit status 1: read kernel buffer failed"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if !errors.Is(err, ErrNotVisible) {
		t.Errorf("%v: the denied attempt is no longer ErrNotVisible", err)
	}
}
