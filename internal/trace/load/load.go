// Package load finds trace files and reads each with the reader its content
// calls for: Kineto Chrome-trace JSON (plain or gzip) or an Nsight Systems
// SQLite export.
package load

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpufeed/gpufeed/internal/trace"
	"github.com/gpufeed/gpufeed/internal/trace/kineto"
	"github.com/gpufeed/gpufeed/internal/trace/nsys"
)

// Format is a trace file format.
type Format string

const (
	Kineto Format = "kineto"
	Nsys   Format = "nsys"
)

// sqliteMagic starts every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// Sniff reads the first bytes of path and names its format.
func Sniff(path string) (Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	n, err := io.ReadFull(bufio.NewReader(f), head)
	head = head[:n]
	switch {
	case bytes.Equal(head, sqliteMagic):
		return Nsys, nil
	case n >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return Kineto, nil
	case n > 0:
		if t := bytes.TrimLeft(head, " \t\r\n\xef\xbb\xbf"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			return Kineto, nil
		}
	}
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", err
	}
	return "", fmt.Errorf("%s: not a trace: expected Chrome-trace JSON (plain or gzip) or an Nsight Systems SQLite export", path)
}

// traceSuffixes are the names a directory scan picks up.
var traceSuffixes = []string{".json", ".json.gz", ".sqlite", ".nsys-sqlite", ".db"}

// Expand turns FILE|DIR arguments into trace files: a file is taken as is,
// a directory contributes its files whose names end like a trace (one rank
// per file, as the PyTorch profiler writes them), sorted.
func Expand(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		var found []string
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			for _, s := range traceSuffixes {
				if strings.HasSuffix(e.Name(), s) {
					found = append(found, filepath.Join(a, e.Name()))
					break
				}
			}
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no trace files (*.json, *.json.gz, *.sqlite) in the directory", a)
		}
		slices.Sort(found)
		out = append(out, found...)
	}
	return out, nil
}

// UncompressedSize estimates the bytes a reader will decode from path: the
// file size, or for gzip the size recorded in its trailer (ISIZE, the
// uncompressed length modulo 4 GiB, so a lower bound for larger files).
func UncompressedSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var magic [2]byte
	if _, err := f.ReadAt(magic[:], 0); err != nil || magic != [2]byte{0x1f, 0x8b} || st.Size() < 18 {
		return st.Size(), nil
	}
	var isize [4]byte
	if _, err := f.ReadAt(isize[:], st.Size()-4); err != nil {
		return st.Size(), nil
	}
	n := int64(isize[0]) | int64(isize[1])<<8 | int64(isize[2])<<16 | int64(isize[3])<<24
	return max(n, st.Size()), nil
}

// Options pass reader options through.
type Options struct {
	Kineto kineto.Options
}

// Read reads one trace file, whatever its format: one trace for a Kineto
// file, one per process with GPU work for an Nsight Systems report.
func Read(path string, opt Options) ([]*trace.Trace, error) {
	f, err := Sniff(path)
	if err != nil {
		return nil, err
	}
	if f == Nsys {
		return nsys.Read(path)
	}
	t, err := kineto.DecodeFile(path, opt.Kineto)
	if err != nil {
		return nil, err
	}
	return []*trace.Trace{t}, nil
}
