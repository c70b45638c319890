package procfs

import (
	"os"
	"strings"
	"testing"
)

// TestField holds the lines of the five loops Field replaced: a status
// file's Tgid (the syscall summary), CapEff (bpfcap, the agent's kernel
// log access) and Uid (the agent's peer check), cpuinfo's model name (the
// drills' machine line) and the NVIDIA driver's Device Minor.
func TestField(t *testing.T) {
	status, err := os.ReadFile("testdata/status.vm")
	if err != nil {
		t.Fatal(err)
	}
	cpuinfo := []byte("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\ncpu MHz\t\t: 2450.000\n\nprocessor\t: 1\nmodel name\t: other\n")
	nvidia := []byte("Model: \t NVIDIA A100\nIRQ: 10\nDevice Minor: \t 3\r\n")
	for _, c := range []struct {
		text      []byte
		key, want string
		ok        bool
	}{
		{status, "Tgid", "14391", true},
		{status, "CapEff", "000001fffeffffff", true},
		{status, "Uid", "0\t0\t0\t0", true},
		{status, "Name", "cp", true},
		{status, "NoSuchKey", "", false},
		{status, "Tgi", "", false},                                       // a key, not a prefix
		{cpuinfo, "model name", "AMD EPYC 7B13 64-Core Processor", true}, // the first processor's
		{cpuinfo, "cpu MHz", "2450.000", true},
		{nvidia, "Device Minor", "3", true},
		{[]byte("no colon here\n"), "no colon here", "", false},
		{[]byte("Key:"), "Key", "", true}, // no newline at the end, empty value
		{nil, "Tgid", "", false},
	} {
		got, ok := Field(c.text, c.key)
		if got != c.want || ok != c.ok {
			t.Errorf("Field(%q, %q) = %q, %v; want %q, %v", firstLine(c.text), c.key, got, ok, c.want, c.ok)
		}
	}
}

func firstLine(b []byte) string { l, _, _ := strings.Cut(string(b), "\n"); return l }

func FuzzField(f *testing.F) {
	seedFile(f, "testdata/status.vm")
	f.Add([]byte("model name\t: x\n"))
	f.Add([]byte(":\n:::\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ok := Field(data, "Tgid")
		if !ok && v != "" {
			t.Fatalf("no Tgid line, but value %q", v)
		}
		if ok && (strings.Contains(v, "\n") || strings.TrimLeft(v, " \t") != v || strings.TrimRight(v, " \t\r") != v) {
			t.Fatalf("value %q holds a newline or untrimmed spaces", v)
		}
	})
}
