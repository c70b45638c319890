// Package profile is what is seen inside a job's threads, whatever reads
// it: today the Python stacks of each thread and which thread holds the GIL.
// The readers live below it (internal/pyspy runs py-spy); the model
// and the text formats a timeline records are here, pure, so the rules read
// them without importing a reader.
//
// A timeline keeps `py-spy dump`'s own text (timeline.EventPyStacks), and
// ParsePySpy reads it when the timeline is judged: a recording judged later
// reads exactly what py-spy printed. ParsePySpy is pure and fuzzed.
package profile

import (
	"github.com/gpufeed/gpufeed/internal/safetext"

	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Frame is one Python frame.
type Frame struct {
	Function string
	File     string
	Line     int // 0 when py-spy printed none
}

// String writes "wait (threading.py:320)".
func (f Frame) String() string {
	if f.Line > 0 {
		return f.Function + " (" + f.File + ":" + strconv.Itoa(f.Line) + ")"
	}
	return f.Function + " (" + f.File + ")"
}

// Thread is one Python thread's stack, innermost frame first.
type Thread struct {
	// ID is as printed: the OS thread id, or the interpreter's thread
	// object address ("0x7ED3637AE700") when py-spy could not map it.
	ID string
	// TID is the OS thread id, 0 when only the address was printed.
	TID  int
	Name string
	// Status is "idle", "active" or "active+gil".
	Status string
	Frames []Frame
}

// Active says py-spy saw the thread running; GIL that it held the GIL.
func (t Thread) Active() bool { return strings.HasPrefix(t.Status, "active") }

// GIL says the thread held the GIL when dumped.
func (t Thread) GIL() bool { return strings.HasSuffix(t.Status, "gil") }

// Process is one dumped process.
type Process struct {
	PID     int
	Cmdline string
	Python  string // interpreter version ("3.11.7")
	Exe     string
	// Reader names what read the stacks: "" for py-spy, or the built-in
	// reader's name (its dump text says "Read by NAME").
	Reader string
	// Skipped counts threads left out because their stack changed while
	// it was read (the built-in reader does not stop the process).
	Skipped int
	Threads []Thread
}

// Source names what read p's stacks, for evidence.
func (p Process) Source() string {
	if p.Reader != "" {
		return p.Reader + ", pid " + strconv.Itoa(p.PID)
	}
	return "py-spy dump --pid " + strconv.Itoa(p.PID)
}

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("py-spy dump: syntax error")

// maxDumpBytes bounds what is read of one dump: thousands of threads with
// deep stacks stay under a few MiB.
const maxDumpBytes = 16 << 20

// ParsePySpy reads the text of `py-spy dump` (one or more processes, as with
// --subprocesses). Local-variable lines (--locals) are skipped.
func ParsePySpy(r io.Reader) ([]Process, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxDumpBytes))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var procs []Process
	var cur *Process
	var th *Thread
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "Process "):
			head, cmdline, ok := strings.Cut(strings.TrimPrefix(line, "Process "), ": ")
			if !ok {
				head, cmdline = strings.TrimSuffix(strings.TrimPrefix(line, "Process "), ":"), ""
			}
			pid, err := strconv.Atoi(head)
			if err != nil || pid <= 0 {
				return procs, fmt.Errorf("%w: line %d: expected \"Process PID: COMMAND\", got %q", ErrSyntax, n, clip(line))
			}
			procs = append(procs, Process{PID: pid, Cmdline: safetext.ScrubCommandLine(cmdline)})
			cur, th = &procs[len(procs)-1], nil
		case strings.HasPrefix(line, "Python v"):
			if cur == nil {
				return procs, fmt.Errorf("%w: line %d: \"Python v...\" before any \"Process\" line", ErrSyntax, n)
			}
			ver, exe, _ := strings.Cut(strings.TrimPrefix(line, "Python v"), " ")
			cur.Python = ver
			cur.Exe = strings.TrimSuffix(strings.TrimPrefix(exe, "("), ")")
		case strings.HasPrefix(line, "Read by "):
			if cur == nil {
				return procs, fmt.Errorf("%w: line %d: \"Read by\" before any \"Process\" line", ErrSyntax, n)
			}
			cur.Reader = strings.TrimPrefix(line, "Read by ")
		case strings.HasPrefix(line, "Skipped "):
			if cur == nil {
				return procs, fmt.Errorf("%w: line %d: \"Skipped\" before any \"Process\" line", ErrSyntax, n)
			}
			k, _, _ := strings.Cut(strings.TrimPrefix(line, "Skipped "), " ")
			v, err := strconv.Atoi(k)
			if err != nil || v < 0 {
				return procs, fmt.Errorf("%w: line %d: expected \"Skipped N threads\", got %q", ErrSyntax, n, clip(line))
			}
			cur.Skipped = v
		case strings.HasPrefix(line, "Thread "):
			if cur == nil {
				return procs, fmt.Errorf("%w: line %d: \"Thread\" before any \"Process\" line", ErrSyntax, n)
			}
			t, err := parseThread(line)
			if err != nil {
				return procs, fmt.Errorf("%w: line %d: %v", ErrSyntax, n, err)
			}
			cur.Threads = append(cur.Threads, t)
			th = &cur.Threads[len(cur.Threads)-1]
		case strings.HasPrefix(line, "        "):
			// --locals: "Arguments:", "Locals:" and "name: repr" lines
		case strings.HasPrefix(line, "    "):
			if th == nil {
				return procs, fmt.Errorf("%w: line %d: a frame before any \"Thread\" line", ErrSyntax, n)
			}
			f, err := parseFrame(strings.TrimSpace(line))
			if err != nil {
				return procs, fmt.Errorf("%w: line %d: %v", ErrSyntax, n, err)
			}
			th.Frames = append(th.Frames, f)
		default:
			return procs, fmt.Errorf("%w: line %d: expected a Process, Python, Thread or frame line, got %q", ErrSyntax, n, clip(line))
		}
	}
	if err := sc.Err(); err != nil {
		return procs, fmt.Errorf("py-spy dump: %w", err)
	}
	return procs, nil
}

// parseThread reads `Thread 1234 (idle): "MainThread"` or `Thread 0x7F.. (active+gil)`.
func parseThread(line string) (Thread, error) {
	rest := strings.TrimPrefix(line, "Thread ")
	id, rest, ok := strings.Cut(rest, " (")
	if !ok || id == "" {
		return Thread{}, fmt.Errorf("expected `Thread ID (STATUS)`, got %q", clip(line))
	}
	status, rest, ok := strings.Cut(rest, ")")
	if !ok {
		return Thread{}, fmt.Errorf("expected `Thread ID (STATUS)`, got %q", clip(line))
	}
	t := Thread{ID: id, Status: status}
	if tid, err := strconv.Atoi(id); err == nil && tid > 0 {
		t.TID = tid
	}
	if name, ok := strings.CutPrefix(rest, ": "); ok {
		t.Name = strings.TrimSuffix(strings.TrimPrefix(name, `"`), `"`)
	}
	return t, nil
}

// parseFrame reads "wait (threading.py:320)" or "<module> (x.py)"; the
// function name may hold spaces and parentheses, the location is the last
// parenthesised group.
func parseFrame(s string) (Frame, error) {
	if !strings.HasSuffix(s, ")") {
		return Frame{}, fmt.Errorf("expected `FUNCTION (FILE:LINE)`, got %q", clip(s))
	}
	o := strings.LastIndex(s, " (")
	if o <= 0 {
		return Frame{}, fmt.Errorf("expected `FUNCTION (FILE:LINE)`, got %q", clip(s))
	}
	f := Frame{Function: s[:o]}
	loc := s[o+2 : len(s)-1]
	if c := strings.LastIndexByte(loc, ':'); c > 0 {
		if n, err := strconv.Atoi(loc[c+1:]); err == nil && n >= 0 {
			f.File, f.Line = loc[:c], n
			return f, nil
		}
	}
	f.File = loc
	return f, nil
}

// clip shortens a string quoted in an error message (at a character
// boundary, saying how much was cut).
func clip(s string) string { return safetext.Cap(s, 80) }

// PySpyInstallHint says how to get py-spy.
const PySpyInstallHint = "install py-spy (`pip install py-spy`, a self-contained binary, or a release from github.com/benfred/py-spy/releases); reading another user's process needs root or CAP_SYS_PTRACE"
