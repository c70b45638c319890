package load

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSniffExpandSize(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte(`{"traceEvents": []}`), 1000))
	zw.Close()
	files := map[string]Format{
		write("a.json", []byte("\n  {\"traceEvents\": []}")): Kineto,
		write("b.json.gz", gz.Bytes()):                       Kineto,
		write("c.sqlite", []byte("SQLite format 3\x00....")): Nsys,
		write("d.json", []byte("\xef\xbb\xbf[]")):            Kineto,
	}
	for p, want := range files {
		if got, err := Sniff(p); err != nil || got != want {
			t.Errorf("Sniff(%s) = %s, %v; want %s", p, got, err, want)
		}
	}
	bad := write("notes.txt", []byte("hello"))
	if _, err := Sniff(bad); err == nil || !strings.Contains(err.Error(), "not a trace") {
		t.Errorf("Sniff(text) err = %v", err)
	}
	got, err := Expand([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || filepath.Base(got[0]) != "a.json" {
		t.Errorf("Expand = %v, want the four trace files sorted", got)
	}
	if _, err := Expand([]string{t.TempDir()}); err == nil {
		t.Error("an empty directory must be an error")
	}
	if n, _ := UncompressedSize(filepath.Join(dir, "b.json.gz")); n != int64(len(`{"traceEvents": []}`))*1000 {
		t.Errorf("UncompressedSize(gz) = %d", n)
	}
}
