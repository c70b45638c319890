package render

import (
	"bytes"
	"testing"
)

// textOf renders doc as text with o.
func textOf(t testing.TB, doc Document, o Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, FormatText, doc, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// jsonOf renders doc as JSON.
func jsonOf(t testing.TB, doc Document) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, FormatJSON, doc, Options{}); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	return b.Bytes()
}

var verbose = Options{Verbose: true}
