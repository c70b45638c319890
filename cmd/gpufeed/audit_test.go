package main

import (
	"strings"
	"testing"
	"time"
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
		if code != 2 || !strings.Contains(stderr, "--duration 0s: want a positive window") && !strings.Contains(stderr, "--duration -1s: want a positive window") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a positive window asked for", args, code, stderr)
		}
	}
	out, _, _ := run(t, "drill", "--help")
	if !strings.Contains(out, "--duration duration") || strings.Contains(out, "--window") {
		t.Errorf("drill --help: want --duration and no --window:\n%s", out)
	}
}
