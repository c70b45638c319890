package compare

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: whatever the bytes, Load returns an input or an error, never
// panics, and what it returns can be compared.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{
		filepath.Join(checkDir, "wrong-numa.json"),
		filepath.Join(runDir, "alone.json"),
		filepath.Join(runDir, "noisy.gpufeed"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"tool":"gpufeed","schema_version":2,"command":"diagnose","events":[{"kind":"kmsg","text":"Killed process 1 (x)"}]}`))
	// What the sniff refuses from its first bytes: zeros (a sparse file),
	// text, a BOM and white space before the document.
	f.Add(make([]byte, 64))
	f.Add([]byte("hello\n"))
	f.Add([]byte("\xef\xbb\xbf \n{\"tool\":\"gpufeed\"}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := Load("fuzz", bytes.NewReader(b))
		if err != nil {
			return
		}
		Compare([]*Input{in, in})
	})
}
