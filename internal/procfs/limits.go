package procfs

import (
	"strings"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Unlimited is the value of a limit /proc/PID/limits writes "unlimited".
const Unlimited = timeline.Unlimited

// Limit is one resource limit, soft and hard (Unlimited when unlimited).
type Limit struct {
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
	Unit string `json:"unit,omitempty"`
}

// Limit names in /proc/PID/limits.
const (
	LimitOpenFiles    = "Max open files"
	LimitLockedMemory = "Max locked memory"
	LimitProcesses    = "Max processes"
)

// Limits reads PROC/PID/limits (pid 0: self), soft and hard. (The
// prometheus/procfs reader keeps only the soft column; "raise the soft limit
// up to the hard one" needs both.)
func (fs FS) Limits(pid int) (map[string]Limit, error) {
	path := fs.PidPath(pid, "limits")
	b, err := readCapped(path, PrivProcMount, capText)
	if err != nil {
		return nil, err
	}
	return ParseLimits(path, b)
}

// NoFile reads RLIMIT_NOFILE from PROC/PID/limits.
func (fs FS) NoFile(pid int) (Limit, error) {
	path := fs.PidPath(pid, "limits")
	b, err := readCapped(path, PrivProcMount, capText)
	if err != nil {
		return Limit{}, err
	}
	return ParseNoFile(path, b)
}

// ParseNoFile is the "Max open files" row of a limits table.
func ParseNoFile(path string, data []byte) (Limit, error) {
	l, err := ParseLimits(path, data)
	if err != nil {
		return Limit{}, err
	}
	nf, ok := l[LimitOpenFiles]
	if !ok {
		return Limit{}, &ParseError{File: path, Offset: -1, Want: `a "Max open files" line`}
	}
	return nf, nil
}

// ParseLimits parses the limits table: an optional header ("Limit  Soft
// Limit  Hard Limit  Units"), then one row per limit: a name of words
// ("Max open files"), the soft and hard values (numbers or "unlimited") and
// an optional unit. No limit's name holds a number, so the first number
// ends it.
func ParseLimits(path string, data []byte) (map[string]Limit, error) {
	out := map[string]Limit{}
	rows := 0
	for i, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || (i == 0 && fields[0] == "Limit") {
			continue
		}
		v := 0
		for v < len(fields) && !isLimitValue(fields[v]) {
			v++
		}
		if v == 0 || v+1 >= len(fields) {
			return nil, parseErr(path, i+1, strings.TrimSpace(line), "a name, then the soft and hard limits (numbers or \"unlimited\")")
		}
		soft, _ := parseLimitValue(fields[v])
		hard, ok := parseLimitValue(fields[v+1])
		if !ok {
			return nil, parseErr(path, i+1, strings.TrimSpace(line), "the hard limit after the soft one (a number or \"unlimited\")")
		}
		l := Limit{Soft: soft, Hard: hard}
		if v+2 < len(fields) {
			l.Unit = fields[v+2]
		}
		out[strings.Join(fields[:v], " ")] = l
		rows++
	}
	if rows == 0 {
		return nil, parseErr(path, 0, "", "rows of name, soft and hard limits")
	}
	return out, nil
}

func isLimitValue(s string) bool {
	_, ok := parseLimitValue(s)
	return ok
}

func parseLimitValue(s string) (uint64, bool) {
	if s == "unlimited" {
		return Unlimited, true
	}
	return parseUint([]byte(s))
}
