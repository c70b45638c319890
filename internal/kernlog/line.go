package kernlog

import (
	"strconv"
	"strings"
	"time"
)

// ParseLine reads one line of kernel log text as the usual tools print it and
// returns its message with whatever time the prefix gave. It recognises:
//
//	<6>[  413.799217] msg                        dmesg --raw
//	[  413.799217] msg                           dmesg
//	[Mon Dec  8 17:51:31 2025] msg               dmesg -T (English dates; others keep no time)
//	2024-04-29T14:55:41,678628+02:00 msg         dmesg --time-format iso
//	Dec 14 20:39:12 host kernel: [24456.8] msg   syslog (no year: the wall time stays unknown)
//	2026-05-28T12:21:57.303295+00:00 host kernel: msg   RFC 3339 syslog
//	May 31 22:34:22 host kernel: msg             journalctl -k (short)
//
// A line with none of these prefixes is returned whole as the message. The
// function never fails: a kernel log pasted by a person is read as well as it
// can be, and what could not be read stays in the message.
func ParseLine(line string) Entry {
	e := Entry{Level: -1}
	s := strings.TrimRight(line, "\r\n")

	// RFC 3339 / ISO 8601 stamp (dmesg --time-format iso, rsyslog).
	if t, rest, ok := cutISOTime(s); ok {
		e.Wall = t
		s = rest
		s = cutSyslogHost(s)
	} else if rest, ok := cutSyslogDate(s); ok {
		// "Dec 14 20:39:12 host kernel: ": no year, so no wall time.
		s = cutSyslogHost(rest)
	}

	// A bare "kernel: " left by a journal excerpt without its date and host.
	s = strings.TrimPrefix(s, "kernel: ")

	// <PRI>
	if len(s) > 2 && s[0] == '<' {
		if end := strings.IndexByte(s, '>'); end > 1 && end <= 4 {
			if pri, err := strconv.Atoi(s[1:end]); err == nil && pri >= 0 {
				e.Level = pri & 7
				s = s[end+1:]
			}
		}
	}

	// [ seconds.micros ] or [weekday month day hh:mm:ss year]
	if len(s) > 2 && s[0] == '[' {
		if end := strings.IndexByte(s, ']'); end > 0 {
			inner := strings.TrimSpace(s[1:end])
			rest := strings.TrimPrefix(s[end+1:], " ")
			if d, ok := parseSeconds(inner); ok {
				e.Mono, e.HasMono = d, true
				s = rest
			} else if t, err := time.ParseInLocation("Mon Jan _2 15:04:05 2006", inner, time.Local); err == nil {
				e.Wall = t
				s = rest
			} else if strings.HasPrefix(inner, "+") {
				// `dmesg --reltime`/`-d` delta: no absolute time.
				s = rest
			} else if looksLikeDate(inner) {
				// A localised `dmesg -T` date: drop it, keep no time.
				s = rest
			}
		}
	}
	e.Message = s
	return e
}

// ParseJournalLine reads one line of `journalctl -k -o short-monotonic`:
// "[  518.050606] host kernel: message".
func ParseJournalLine(line string) Entry {
	e := ParseLine(line)
	if e.HasMono {
		e.Message = cutSyslogHost(e.Message)
	}
	return e
}

// parseSeconds reads "413.799217" (seconds since boot, as printk prints it).
func parseSeconds(s string) (time.Duration, bool) {
	whole, frac, ok := strings.Cut(s, ".")
	if !ok || whole == "" || frac == "" || len(frac) > 9 || len(whole) > 10 {
		return 0, false
	}
	sec, err := strconv.ParseUint(whole, 10, 64)
	if err != nil {
		return 0, false
	}
	ns, err := strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(sec)*time.Second + time.Duration(ns), true
}

// cutISOTime cuts a leading RFC 3339 time (dmesg writes a comma before the
// fraction) and the space after it.
func cutISOTime(s string) (time.Time, string, bool) {
	sp := strings.IndexByte(s, ' ')
	if sp < 19 || s[4] != '-' || s[10] != 'T' {
		return time.Time{}, s, false
	}
	stamp := strings.Replace(s[:sp], ",", ".", 1)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-0700", "2006-01-02T15:04:05-0700"} {
		if t, err := time.Parse(layout, stamp); err == nil {
			return t, s[sp+1:], true
		}
	}
	return time.Time{}, s, false
}

// cutSyslogDate cuts a leading "Dec 14 20:39:12 ".
func cutSyslogDate(s string) (string, bool) {
	if len(s) < 16 || s[3] != ' ' || s[6] != ' ' || s[9] != ':' || s[12] != ':' || s[15] != ' ' {
		return s, false
	}
	if _, err := time.Parse("Jan _2 15:04:05", s[:15]); err != nil {
		return s, false
	}
	return s[16:], true
}

// cutSyslogHost cuts "host kernel: " (a host name has no space) when present.
func cutSyslogHost(s string) string {
	sp := strings.IndexByte(s, ' ')
	if sp <= 0 {
		return s
	}
	if rest, ok := strings.CutPrefix(s[sp+1:], "kernel: "); ok {
		return rest
	}
	return s
}

// looksLikeDate says whether a bracketed prefix is a date in some locale:
// it holds a clock time hh:mm:ss and a four-digit year.
func looksLikeDate(s string) bool {
	fields := strings.Fields(s)
	clock, year := false, false
	for _, f := range fields {
		if len(f) == 8 && f[2] == ':' && f[5] == ':' {
			clock = true
		}
		if len(f) == 4 {
			if _, err := strconv.Atoi(f); err == nil {
				year = true
			}
		}
	}
	return clock && year
}
