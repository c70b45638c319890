package kernlog

import (
	"github.com/gpufeed/gpufeed/internal/safetext"

	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Entry is one kernel log message with what is known of its time.
type Entry struct {
	// Seq is the kernel's sequence number (/dev/kmsg only); 0 when unknown.
	Seq uint64
	// Level is the syslog level 0 (emerg) to 7 (debug); -1 when unknown.
	Level int
	// Mono is the printk timestamp: time since boot on the kernel's
	// monotonic clock. HasMono says whether the source gave one.
	Mono    time.Duration
	HasMono bool
	// Wall is the wall-clock time of the message: the boot time plus Mono
	// for /dev/kmsg, dmesg and journalctl; the printed date for a pasted
	// `dmesg -T` or syslog line. Zero when unknown.
	Wall time.Time
	// Message is the text exactly as the kernel wrote it. It is
	// attacker-controlled: pass it through Sanitize before printing.
	Message string
}

// ErrSyntax is wrapped by every parse error of this package.
var ErrSyntax = errors.New("kmsg: syntax error")

// MaxRecordBytes bounds one /dev/kmsg record: the kernel's own limit for one
// record with its dictionary is CONSOLE_EXT_LOG_MAX, 8 KiB; twice that leaves
// room and still keeps a read buffer small.
const MaxRecordBytes = 16 << 10

// ParseRecord parses one /dev/kmsg record:
//
//	PRI,SEQ,USEC,FLAGS[,...];MESSAGE
//	 KEY=VALUE (dictionary lines, ignored)
//
// PRI is facility*8+level, USEC the printk timestamp in microseconds. The
// message keeps the kernel's own escaping (non-printable bytes as \xNN).
func ParseRecord(b []byte) (Entry, error) {
	s := string(b)
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		s = s[:nl] // the dictionary follows on continuation lines
	}
	semi := strings.IndexByte(s, ';')
	if semi < 0 {
		return Entry{}, fmt.Errorf("%w: record %q: expected \"PRI,SEQ,USEC,FLAGS;MESSAGE\", no ';' found", ErrSyntax, clip(s))
	}
	head, msg := s[:semi], s[semi+1:]
	fields := strings.Split(head, ",")
	if len(fields) < 3 {
		return Entry{}, fmt.Errorf("%w: record header %q: expected at least PRI,SEQ,USEC", ErrSyntax, clip(head))
	}
	pri, err := strconv.ParseUint(fields[0], 10, 32)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: record header %q: field 1 (priority): expected a number", ErrSyntax, clip(head))
	}
	seq, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: record header %q: field 2 (sequence): expected a number", ErrSyntax, clip(head))
	}
	usec, err := strconv.ParseUint(fields[2], 10, 63)
	if err != nil || usec > uint64(maxMono/time.Microsecond) {
		return Entry{}, fmt.Errorf("%w: record header %q: field 3 (microseconds since boot): expected a number", ErrSyntax, clip(head))
	}
	return Entry{
		Seq:     seq,
		Level:   int(pri & 7),
		Mono:    time.Duration(usec) * time.Microsecond,
		HasMono: true,
		Message: msg,
	}, nil
}

// maxMono bounds a parsed monotonic timestamp (about 290 years), so a forged
// value cannot overflow time.Duration.
const maxMono = time.Duration(1<<63 - 1)

// clip shortens a string quoted in an error message (at a character
// boundary, saying how much was cut).
func clip(s string) string { return safetext.Cap(s, 80) }
