package kernlog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// Defaults bound every read: the kernel's ring buffer is at most a few MiB
// (log_buf_len), so 32 MiB read means something is wrong; 50,000 records
// keep hours of a busy host's log while bounding memory to a few MiB.
const (
	DefaultPath       = "/dev/kmsg"
	DefaultMaxBytes   = 32 << 20
	DefaultMaxRecords = 50000
	// DefaultCommandTimeout bounds a fallback command (dmesg, journalctl).
	DefaultCommandTimeout = 10 * time.Second
)

// maxTextLine bounds one line of a fallback command's output.
const maxTextLine = 64 << 10

// Runner starts a command and returns its standard output. Closing the
// reader ends the command (killing it if it still runs) and returns its
// error, if any.
type Runner func(ctx context.Context, name string, args ...string) (io.ReadCloser, error)

// Reader reads the kernel log from /dev/kmsg, falling back to dmesg and then
// journalctl. The zero value reads the real sources with the default caps.
type Reader struct {
	// Path is the kmsg device (default /dev/kmsg). A regular file holding
	// records, one per line, is read the same way (fixtures).
	Path string
	// Run runs the fallback commands (default: ExecRunner). A nil Run with
	// NoFallback set reads Path only.
	Run        Runner
	NoFallback bool
	// MaxBytes caps what is read from any source; MaxRecords caps the
	// entries kept (the newest are kept).
	MaxBytes   int64
	MaxRecords int
	// Since drops entries older than this time since boot (0 keeps all).
	Since time.Duration
	// BootTime returns the wall-clock time of boot, to turn printk
	// timestamps into wall time (default: now minus CLOCK_MONOTONIC).
	BootTime func() (time.Time, error)
	// Shared, when set, shares one read among readers for a while (the
	// agent's jobs); nil reads every time. A shared read serves only a
	// reader whose NotBefore it was made at or after (the end of the
	// window the reader reads for), so no line of its window is missed.
	Shared    *Shared
	NotBefore time.Time
}

// Attempt is one source tried and why it gave nothing.
type Attempt struct {
	Source string
	Err    error
}

// Log is what one read returned.
type Log struct {
	// Source names where the entries came from ("/dev/kmsg", "dmesg --raw",
	// "journalctl -k").
	Source  string
	Entries []Entry
	// Dropped counts older entries left out to respect MaxRecords; Truncated
	// says reading stopped at MaxBytes; Lost counts /dev/kmsg records the
	// kernel overwrote before they could be read. Skipped counts records that
	// did not parse.
	Dropped   int
	Truncated bool
	Lost      int
	Skipped   int
	// Failed lists the sources tried before Source and why they failed.
	Failed []Attempt
	// BootTime is the boot time used to compute wall times; zero when unknown.
	BootTime time.Time
}

// ErrNotVisible is wrapped when the kernel log exists but the caller may not
// read it.
var ErrNotVisible = errors.New("kernel log not visible")

// Read reads the kernel log from the first source that works.
func (r *Reader) Read(ctx context.Context) (*Log, error) {
	if r.Shared != nil {
		return r.Shared.read(ctx, r)
	}
	path := r.Path
	if path == "" {
		path = DefaultPath
	}
	var failed []Attempt
	log, err := r.readKmsg(path)
	if err == nil {
		return r.finish(log, failed), nil
	}
	failed = append(failed, Attempt{Source: path, Err: err})
	if r.NoFallback {
		return nil, joinAttempts(failed)
	}
	run := r.Run
	if run == nil {
		run = ExecRunner
	}
	for _, src := range []struct {
		name    string
		args    []string
		journal bool
	}{
		{"dmesg", []string{"--raw"}, false},
		{"journalctl", []string{"-k", "-b", "-q", "--no-pager", "-o", "short-monotonic", "-n", strconv.Itoa(r.maxRecords())}, true},
	} {
		log, err := r.readCommand(ctx, run, src.name, src.args, src.journal)
		if err == nil {
			return r.finish(log, failed), nil
		}
		failed = append(failed, Attempt{Source: src.name, Err: err})
	}
	return nil, joinAttempts(failed)
}

func (r *Reader) maxBytes() int64 {
	if r.MaxBytes > 0 {
		return r.MaxBytes
	}
	return DefaultMaxBytes
}

func (r *Reader) maxRecords() int {
	if r.MaxRecords > 0 {
		return r.MaxRecords
	}
	return DefaultMaxRecords
}

// finish fills wall times from the boot time.
func (r *Reader) finish(log *Log, failed []Attempt) *Log {
	log.Failed = failed
	boot := r.BootTime
	if boot == nil {
		boot = SystemBootTime
	}
	if bt, err := boot(); err == nil {
		log.BootTime = bt
		for i := range log.Entries {
			if log.Entries[i].HasMono && log.Entries[i].Wall.IsZero() {
				log.Entries[i].Wall = bt.Add(log.Entries[i].Mono)
			}
		}
	}
	return log
}

// ring keeps the newest max entries.
type ring struct {
	max     int
	since   time.Duration
	entries []Entry
	start   int
	dropped int
}

func (g *ring) add(e Entry) {
	if g.since > 0 && e.HasMono && e.Mono < g.since {
		return
	}
	if len(g.entries) < g.max {
		g.entries = append(g.entries, e)
		return
	}
	g.entries[g.start] = e
	g.start = (g.start + 1) % g.max
	g.dropped++
}

func (g *ring) ordered() []Entry {
	return append(g.entries[g.start:len(g.entries):len(g.entries)], g.entries[:g.start]...)
}

// readKmsg reads the kmsg device (or a fixture file of records).
func (r *Reader) readKmsg(path string) (*Log, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, describeOpenError(path, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	g := &ring{max: r.maxRecords(), since: r.Since}
	log := &Log{Source: path}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		// A fixture: records separated by newlines, dictionary lines
		// starting with a space. The *os.File owns the descriptor from
		// here: closing it twice (or leaving it to the finalizer after a
		// raw close) would close whatever file reused the number.
		f := os.NewFile(uintptr(fd), path)
		defer f.Close()
		if err := readRecordFile(f, r.maxBytes(), g, log); err != nil {
			return nil, err
		}
		log.Entries, log.Dropped = g.ordered(), g.dropped
		return log, nil
	}
	// The device returns one record per read and EAGAIN once nothing more
	// is buffered; it is read with raw system calls so that the Go runtime
	// never parks on it waiting for new records.
	defer syscall.Close(fd)
	buf := make([]byte, MaxRecordBytes)
	var total int64
	for {
		n, err := syscall.Read(fd, buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			log.Entries, log.Dropped = g.ordered(), g.dropped
			return log, nil
		case err == syscall.EPIPE:
			// Records were overwritten before we read them; the next
			// read resumes at the oldest one still buffered.
			log.Lost++
			continue
		case err == syscall.EPERM || err == syscall.EACCES:
			return nil, fmt.Errorf("%s: %w: needs CAP_SYSLOG (kernel.dmesg_restrict=1)", path, ErrNotVisible)
		case err != nil:
			return nil, fmt.Errorf("%s: read: %w", path, err)
		case n == 0:
			log.Entries, log.Dropped = g.ordered(), g.dropped
			return log, nil
		}
		total += int64(n)
		e, perr := ParseRecord(buf[:n])
		if perr != nil {
			log.Skipped++
		} else {
			g.add(e)
		}
		if total >= r.maxBytes() {
			log.Truncated = true
			log.Entries, log.Dropped = g.ordered(), g.dropped
			return log, nil
		}
	}
}

// readRecordFile reads kmsg records from a regular file.
func readRecordFile(f io.Reader, maxBytes int64, g *ring, log *Log) error {
	sc := bufio.NewScanner(io.LimitReader(f, maxBytes+1))
	sc.Buffer(make([]byte, 0, 64<<10), MaxRecordBytes)
	var read int64
	for sc.Scan() {
		line := sc.Bytes()
		read += int64(len(line)) + 1
		if read > maxBytes {
			log.Truncated = true
			break
		}
		if len(line) == 0 || line[0] == ' ' {
			continue // dictionary line of the previous record
		}
		e, err := ParseRecord(line)
		if err != nil {
			log.Skipped++
			continue
		}
		g.add(e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			log.Truncated = true
			log.Skipped++
			return nil
		}
		return fmt.Errorf("%s: %w", log.Source, err)
	}
	return nil
}

// readCommand runs a fallback command and reads its lines.
func (r *Reader) readCommand(ctx context.Context, run Runner, name string, args []string, journal bool) (*Log, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultCommandTimeout)
	defer cancel()
	out, err := run(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	source := name
	if len(args) > 0 {
		source += " " + args[0]
	}
	log := &Log{Source: source}
	g := &ring{max: r.maxRecords(), since: r.Since}
	br := bufio.NewReaderSize(out, 64<<10)
	var read int64
	printed := 0
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			read += int64(len(line)) + 1
			var e Entry
			if journal {
				e = ParseJournalLine(string(line))
			} else {
				e = ParseLine(string(line))
			}
			if e.Message != "" {
				printed++
				g.add(e)
			}
			if read >= r.maxBytes() {
				log.Truncated = true
				break
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			out.Close()
			return nil, fmt.Errorf("%s: reading output: %w", source, err)
		}
	}
	if cerr := out.Close(); cerr != nil && !log.Truncated {
		return nil, cerr
	}
	log.Entries, log.Dropped = g.ordered(), g.dropped
	// A log with no line since Since (the job's start: a quiet kernel) is
	// read; a command that printed no message at all read nothing.
	if printed == 0 {
		return nil, fmt.Errorf("%s: printed no kernel messages", source)
	}
	return log, nil
}

// readLine reads one line, cutting lines longer than maxTextLine (the rest
// of such a line is discarded).
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) <= maxTextLine {
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

func describeOpenError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%s: %w: needs CAP_SYSLOG or root (kernel.dmesg_restrict=1)", path, ErrNotVisible)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%s: does not exist (a container without /dev/kmsg?)", path)
	}
	return fmt.Errorf("%s: %w", path, err)
}

func joinAttempts(failed []Attempt) error {
	return fmt.Errorf("kernel log: no source could be read: %w", attempts(failed))
}

// attempts is the failed attempts as one error, each still matched by
// errors.Is and As, said on one line: errors.Join's newlines reached the
// report as an escaped "\x0a" inside a finding's claim.
type attempts []Attempt

func (a attempts) Error() string {
	msgs := make([]string, 0, len(a))
	for _, at := range a {
		msgs = append(msgs, at.Err.Error())
	}
	return strings.Join(msgs, "; ")
}

func (a attempts) Unwrap() []error {
	errs := make([]error, 0, len(a))
	for _, at := range a {
		errs = append(errs, at.Err)
	}
	return errs
}

// ExecRunner runs a command from PATH, its standard error kept (bounded) for
// the error message.
func ExecRunner(ctx context.Context, name string, args ...string) (io.ReadCloser, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s: not installed: %w", name, err)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	stderr := &capped{max: 4 << 10}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &cmdOutput{ReadCloser: out, cmd: cmd, stderr: stderr, name: name}, nil
}

type cmdOutput struct {
	io.ReadCloser
	cmd    *exec.Cmd
	stderr *capped
	name   string
}

func (c *cmdOutput) Close() error {
	// Killing first makes Close bounded when the caller stopped reading
	// early; an exited process ignores the signal.
	_ = c.cmd.Process.Kill()
	_ = c.ReadCloser.Close()
	err := c.cmd.Wait()
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && !exit.Exited() {
		return nil // killed by us after reading what we wanted
	}
	msg := bytes.TrimSpace(c.stderr.buf.Bytes())
	if len(msg) > 0 {
		return fmt.Errorf("%s: %w: %s", c.name, err, safetext.Escape(string(msg)))
	}
	return fmt.Errorf("%s: %w", c.name, err)
}

// capped is a writer that keeps the first max bytes.
type capped struct {
	max int
	buf bytes.Buffer
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
