package main

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// TestCommandLineSecretsScrubbed: a job whose command line holds a
// password flag, a URL with a password and a Hugging Face token, attached
// to with every output at once (the JSON report, the recording, the
// Perfetto trace), attached to again for the jsonl stream, then the recording judged in
// every other format (text, JSON, HTML): no output
// holds a secret, and the command stays recognisable (the flag names, the
// URL's user and host, the token's prefix). They were copied verbatim into
// the JSON, HTML and jsonl reports and the recording.
func TestCommandLineSecretsScrubbed(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	token := "hf_" + strings.Repeat("aB3", 12)
	secrets := []string{"hunter2", "s3cr3tpw", token, "sk-live-0123456789abcdefghij"}
	job := startWorkload(t, os.Environ(), false, "/bin/sh", "-c", "sleep 60", "sh",
		"--password=hunter2", "postgres://admin:s3cr3tpw@db.local/x", "--token", token, "--api-key", "sk-live-0123456789abcdefghij")
	time.Sleep(200 * time.Millisecond)
	dir := t.TempDir()
	rec, pf := filepath.Join(dir, "run.gpufeed"), filepath.Join(dir, "run.perfetto.json")
	outs := map[string]string{}
	stdout, stderr, code := run(t, "diagnose", "--pid", strconv.Itoa(job.Process.Pid), "--duration", "2s", "-o", "json", "--record", rec, "--perfetto", pf)
	if code != 0 {
		t.Fatalf("diagnose exited %d: %s", code, stderr)
	}
	outs["diagnose -o json"] = stdout
	stdout, stderr, code = run(t, "diagnose", "--pid", strconv.Itoa(job.Process.Pid), "--duration", "2s", "-o", "jsonl")
	if code != 0 {
		t.Fatalf("diagnose -o jsonl exited %d: %s", code, stderr)
	}
	outs["diagnose -o jsonl"] = stdout
	for _, f := range []string{"text", "json", "html"} {
		stdout, stderr, code := run(t, "report", rec, "-o", f, "--verbose")
		if code != 0 {
			t.Fatalf("report -o %s exited %d: %s", f, code, stderr)
		}
		outs["report -o "+f] = stdout
	}
	b, err := os.ReadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	outs["perfetto"] = string(b)
	f, err := os.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	outs["the recording"] = string(raw)
	for name, out := range outs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s holds the secret %q", name, s)
			}
		}
	}
	for _, name := range []string{"diagnose -o json", "report -o json", "report -o html", "the recording"} {
		for _, want := range []string{"--password=***", "postgres://admin:***@db.local/x", "--token", "--api-key"} {
			if !strings.Contains(out(outs[name]), want) {
				t.Errorf("%s: the command line lost %q", name, want)
			}
		}
	}
}

// out undoes the escapes JSON and HTML put on the characters a scrubbed
// command line holds.
func out(s string) string {
	return strings.NewReplacer(`\u0026`, "&", "&amp;", "&", "&#43;", "+", "&#34;", `"`).Replace(s)
}
