package traceload

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// realTrace is a real Kineto trace from HTA's test data (gzip).
var realTrace = filepath.Join("..", "..", "testdata", "traces", "critical_path", "alexnet", "benchmark_result_2869224_1695835535_trace.json.gz")

func write(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSniffExpand(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte(" "), 1000))
	zw.Write([]byte(`{"traceEvents": []}`))
	zw.Close()
	files := map[string]Format{
		write(t, dir, "a.json", []byte("\n  {\"traceEvents\": []}")): Kineto,
		write(t, dir, "b.json.gz", gz.Bytes()):                       Kineto,
		write(t, dir, "c.sqlite", []byte("SQLite format 3\x00....")): Nsys,
		write(t, dir, "d.json", []byte("\xef\xbb\xbf[]")):            Kineto,
	}
	for p, want := range files {
		if got, err := Sniff(p); err != nil || got != want {
			t.Errorf("Sniff(%s) = %s, %v; want %s", p, got, err, want)
		}
	}
	for name, want := range map[string]string{
		"notes.txt": `it starts with "hello"`,
		"empty":     "the file is empty",
		"lib.so":    "an ELF executable",
	} {
		b := map[string][]byte{"notes.txt": []byte("hello"), "empty": nil, "lib.so": []byte("\x7fELF\x02\x01\x01")}[name]
		p := write(t, t.TempDir(), name, b)
		if _, err := Sniff(p); err == nil || !strings.Contains(err.Error(), p+": not a trace") || !strings.Contains(err.Error(), want) {
			t.Errorf("Sniff(%s) err = %v, want it to say %q", name, err, want)
		}
	}
	got, skipped, err := Expand([]string{dir})
	if err != nil || len(skipped) != 0 {
		t.Fatal(err, skipped)
	}
	if len(got) != 4 || filepath.Base(got[0]) != "a.json" {
		t.Errorf("Expand = %v, want the four trace files sorted", got)
	}
	if _, _, err := Expand([]string{t.TempDir()}); err == nil {
		t.Error("an empty directory must be an error")
	}
	lf, err := Open(filepath.Join(dir, "b.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if lf.SizeHint != 1000+int64(len(`{"traceEvents": []}`)) {
		t.Errorf("SizeHint(gz) = %d", lf.SizeHint)
	}
}

// TestExpandSkips: entries that cannot be traces are skipped with a reason
// instead of failing the directory (a named pipe would block the open).
func TestExpandSkips(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(realTrace)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "rank0.json.gz", b)
	os.Symlink("/nonexistent/rank1.json", filepath.Join(dir, "rank1.json"))
	os.Symlink("rank2.json", filepath.Join(dir, "rank2.json"))
	if err := syscall.Mkfifo(filepath.Join(dir, "rank3.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "old.json"), 0o755)
	write(t, dir, "README.md", []byte("not named like a trace"))
	files, skipped, err := Expand([]string{dir, filepath.Join(dir, "missing.json")})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || filepath.Base(files[0]) != "rank0.json.gz" {
		t.Errorf("files %v, want rank0.json.gz alone", files)
	}
	want := map[string]string{
		"rank1.json":   "a symbolic link to /nonexistent/rank1.json, which does not exist",
		"rank2.json":   "a symbolic link loop",
		"rank3.json":   "not a regular file (a named pipe)",
		"missing.json": "no such file or directory",
	}
	for _, s := range skipped {
		w, ok := want[filepath.Base(s.File)]
		if !ok || !strings.Contains(s.Reason, w) {
			t.Errorf("skipped %s: %q, want %q", s.File, s.Reason, w)
		}
		delete(want, filepath.Base(s.File))
	}
	if len(want) != 0 {
		t.Errorf("not listed as skipped: %v", want)
	}
	// A directory whose trace-named entries are all unreadable is not an
	// error here: the caller reports the skipped entries.
	dir2 := t.TempDir()
	os.Symlink("/nonexistent", filepath.Join(dir2, "r.json"))
	if files, skipped, err := Expand([]string{dir2}); err != nil || len(files) != 0 || len(skipped) != 1 {
		t.Errorf("all entries unreadable: %v %v %v", files, skipped, err)
	}
}

// TestReadFromPipe: the format is sniffed from the reader the decoder goes
// on to read, so a pipe (which cannot be reopened or rewound) reads whole,
// by its /proc/self/fd path and as "-".
func TestReadFromPipe(t *testing.T) {
	b, err := os.ReadFile(realTrace)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Read(realTrace, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pipe := func() *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() { w.Write(b); w.Close() }()
		return r
	}
	r := pipe()
	got, err := Read("/proc/self/fd/"+strconv.Itoa(int(r.Fd())), Options{})
	r.Close()
	if err != nil || len(got) != 1 || got[0].Counts != want[0].Counts {
		t.Fatalf("pipe by path: err %v, %d traces", err, len(got))
	}
	stdin := os.Stdin
	defer func() { os.Stdin = stdin }()
	os.Stdin = pipe()
	lf, err := Open(Stdin)
	if err != nil {
		t.Fatal(err)
	}
	if lf.Name != "stdin" || lf.SizeHint != 0 {
		t.Errorf("stdin: name %q size hint %d", lf.Name, lf.SizeHint)
	}
	got, err = lf.Read(Options{})
	if err != nil || len(got) != 1 || got[0].Counts != want[0].Counts || got[0].Source != "stdin" {
		t.Fatalf("stdin: err %v, %d traces", err, len(got))
	}
	// An Nsight export needs random access: through a pipe it is refused
	// with the reason, not misread.
	r, w, _ := os.Pipe()
	go func() { w.Write([]byte("SQLite format 3\x00rest of a database")); w.Close() }()
	_, err = Read("/proc/self/fd/"+strconv.Itoa(int(r.Fd())), Options{})
	r.Close()
	if err == nil || !strings.Contains(err.Error(), "needs random access") {
		t.Errorf("SQLite through a pipe: err = %v", err)
	}
}
