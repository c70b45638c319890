// Package load finds trace files and reads each with the reader its content
// calls for: Kineto Chrome-trace JSON (plain or gzip) or an Nsight Systems
// SQLite export.
//
// A file is opened once and its format sniffed from the same reader the
// decoder then reads, so pipes (/dev/stdin, <(zcat trace.json.gz), "-")
// work. A directory contributes the files in it that are named like traces;
// those that cannot be read (a dangling link, a link loop, a named pipe, a
// file that is not a trace) are listed as skipped with the reason, and the
// caller reports the others.
package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/nsys"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// Format is a trace file format.
type Format string

const (
	Kineto Format = "kineto"
	Nsys   Format = "nsys"
)

// Stdin is the argument that reads a trace from standard input.
const Stdin = "-"

// sqliteMagic starts every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// File is a trace file opened once: its format was sniffed from the
// buffered reader the decoder goes on to read.
type File struct {
	// Path is the argument or directory entry; Name labels messages
	// ("stdin" for "-").
	Path, Name string
	Format     Format
	// SizeHint estimates the bytes the reader will decode (0 when unknown,
	// as for a pipe); it sizes memory only.
	SizeHint int64
	f        *os.File
	r        *bufio.Reader
	regular  bool
}

// Open opens path ("-" for standard input) and sniffs its format.
func Open(path string) (*File, error) {
	lf := &File{Path: path, Name: path}
	if path == Stdin {
		lf.Name, lf.f = "stdin", os.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, openError(path, err)
		}
		lf.f = f
	}
	st, err := lf.f.Stat()
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: %w", lf.Name, err)
	}
	if st.IsDir() {
		lf.Close()
		return nil, fmt.Errorf("%s: a directory, not a trace file", lf.Name)
	}
	lf.regular = st.Mode().IsRegular()
	if n, ok := fdPath(path); ok && !lf.regular {
		// <(zcat trace.json.gz) arrives as /dev/fd/63: say what it is.
		lf.Name = "pipe (fd " + n + ")"
	}
	lf.r = bufio.NewReaderSize(lf.f, 64<<10)
	head, err := lf.r.Peek(len(sqliteMagic))
	if err != nil && err != io.EOF {
		lf.Close()
		return nil, fmt.Errorf("%s: reading the first bytes: %w", lf.Name, err)
	}
	switch {
	case bytes.Equal(head, sqliteMagic):
		lf.Format = Nsys
		lf.SizeHint = st.Size()
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		lf.Format = Kineto
	default:
		if t := bytes.TrimLeft(head, trace.JSONStart); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			lf.Format = Kineto
		}
	}
	if lf.Format == "" {
		lf.Close()
		return nil, fmt.Errorf("%s: not a trace: expected Chrome-trace JSON (plain or gzip) or an Nsight Systems SQLite export; %s", lf.Name, trace.LooksLike(head))
	}
	if lf.Format == Kineto {
		lf.SizeHint = kineto.SizeHint(lf.f)
	}
	return lf, nil
}

// fdPath reports whether path names an open file descriptor (/dev/fd/N,
// /proc/self/fd/N, as a shell's process substitution writes it) and which.
func fdPath(path string) (string, bool) {
	for _, dir := range []string{"/dev/fd/", "/proc/self/fd/"} {
		if n, ok := strings.CutPrefix(path, dir); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return n, true
		}
	}
	return "", false
}

// Read reads the trace: one for a Kineto file, one per process with GPU work
// for an Nsight Systems report. It closes the file.
func (lf *File) Read(opt Options) ([]*trace.Trace, error) {
	defer lf.Close()
	if lf.Format == Nsys {
		if !lf.regular {
			return nil, fmt.Errorf("%s: an Nsight Systems export is an SQLite database, which needs random access: save it to a file first and pass that file", lf.Name)
		}
		path := lf.Path
		if path == Stdin {
			path = "/dev/stdin" // a regular file redirected to standard input
		}
		return nsys.Read(path)
	}
	o := opt.Kineto
	if o.SizeHint == 0 {
		o.SizeHint = lf.SizeHint
	}
	t, err := kineto.Decode(lf.r, lf.Name, o)
	if err != nil {
		return nil, err
	}
	return []*trace.Trace{t}, nil
}

// Close closes the file (never standard input).
func (lf *File) Close() error {
	if lf.f == nil || lf.f == os.Stdin {
		return nil
	}
	err := lf.f.Close()
	lf.f = nil
	return err
}

// Sniff names the format of the file at path.
func Sniff(path string) (Format, error) {
	lf, err := Open(path)
	if err != nil {
		return "", err
	}
	defer lf.Close()
	return lf.Format, nil
}

// Options pass reader options through.
type Options struct {
	Kineto kineto.Options
}

// Read reads one trace file, whatever its format.
func Read(path string, opt Options) ([]*trace.Trace, error) {
	lf, err := Open(path)
	if err != nil {
		return nil, err
	}
	return lf.Read(opt)
}

// traceSuffixes are the names a directory scan picks up.
var traceSuffixes = []string{".json", ".json.gz", ".sqlite", ".nsys-sqlite", ".db"}

// Skipped is an argument or directory entry that was not read, and why.
type Skipped struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// Expand turns FILE|DIR arguments into trace files: a file (or "-") is taken
// as is, a directory contributes its entries whose names end like a trace
// (one rank per file, as the PyTorch profiler writes them), sorted. Entries
// that cannot be traces (dangling or looping links, named pipes, devices,
// sockets) and arguments that do not exist are returned as skipped. It fails
// only for a directory with no trace-named entry at all.
func Expand(args []string) ([]string, []Skipped, error) {
	var out []string
	var skipped []Skipped
	for _, a := range args {
		if a == Stdin {
			out = append(out, a)
			continue
		}
		st, err := os.Stat(a)
		if err != nil {
			skipped = append(skipped, Skipped{a, Reason(a, err)})
			continue
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		if err != nil {
			skipped = append(skipped, Skipped{a, Reason(a, err)})
			continue
		}
		var found []string
		before := len(skipped)
		for _, e := range ents {
			if !hasTraceSuffix(e.Name()) {
				continue
			}
			p := filepath.Join(a, e.Name())
			st, err := os.Stat(p)
			switch {
			case err != nil:
				skipped = append(skipped, Skipped{p, Reason(p, err)})
			case st.IsDir():
				// A directory named like a trace is not one; nested rank
				// directories are not searched.
			case !st.Mode().IsRegular():
				// Opening a named pipe would block until a writer comes.
				skipped = append(skipped, Skipped{p, "not a regular file (" + fileKind(st.Mode()) + ")"})
			default:
				found = append(found, p)
			}
		}
		if len(found) == 0 && len(skipped) == before {
			return nil, nil, fmt.Errorf("%s: no trace files (*.json, *.json.gz, *.sqlite) in the directory", a)
		}
		slices.Sort(found)
		out = append(out, found...)
	}
	return out, skipped, nil
}

func hasTraceSuffix(name string) bool {
	for _, s := range traceSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// openError rewords the errors of opening path.
func openError(path string, err error) error {
	return errors.New(path + ": " + Reason(path, err))
}

// Reason says in words why path could not be read, without repeating path.
func Reason(path string, err error) string {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return "a symbolic link loop (following the links never reaches a file)"
	case errors.Is(err, fs.ErrNotExist):
		if dst, lerr := os.Readlink(path); lerr == nil {
			return fmt.Sprintf("a symbolic link to %s, which does not exist", dst)
		}
		return "no such file or directory"
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("permission denied: not readable by user %d; run as the file's owner or root, or make it readable", os.Geteuid())
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	return strings.TrimPrefix(msg, path+": ")
}
