package sys

import (
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Unlimited is the value of a limit written "unlimited": the sampler's
// (timeline.Unlimited), so a limit read by either package compares equal.
const Unlimited = timeline.Unlimited

// Limit is one resource limit, soft and hard.
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

// Limits reads proc/PID/limits (pid 0: self).
func (f FS) Limits(pid int) (map[string]Limit, error) {
	p := f.ProcPath(PIDDir(pid), "limits")
	data, _, err := ReadCapped(p, 64<<10)
	if err != nil {
		return nil, err
	}
	return ParseLimits(p, data)
}

// ParseLimits parses the limits table. The header fixes where the soft
// column starts, because limit names hold spaces ("Max open files"); after
// it come soft, hard and an optional unit. prometheus/procfs keeps only the
// soft limit, and check needs both.
func ParseLimits(path string, data []byte) (map[string]Limit, error) {
	lines := strings.Split(string(data), "\n")
	softCol := strings.Index(lines[0], "Soft Limit")
	if !strings.HasPrefix(lines[0], "Limit") || softCol < 0 {
		return nil, parseErr(path, 1, "want the header \"Limit  Soft Limit  Hard Limit  Units\"")
	}
	out := map[string]Limit{}
	for i, line := range lines[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if len(line) <= softCol {
			return nil, parseErr(path, i+2, "row shorter than the header: want name, soft, hard")
		}
		name := strings.TrimSpace(line[:softCol])
		fields := strings.Fields(line[softCol:])
		if name == "" || len(fields) < 2 {
			return nil, parseErr(path, i+2, "want name, soft, hard")
		}
		soft, err1 := parseLimitValue(fields[0])
		hard, err2 := parseLimitValue(fields[1])
		if err1 != nil || err2 != nil {
			return nil, parseErr(path, i+2, "%q %q: want numbers or \"unlimited\"", fields[0], fields[1])
		}
		l := Limit{Soft: soft, Hard: hard}
		if len(fields) > 2 {
			l.Unit = fields[2]
		}
		out[name] = l
	}
	return out, nil
}

func parseLimitValue(s string) (uint64, error) {
	if s == "unlimited" {
		return Unlimited, nil
	}
	return strconv.ParseUint(s, 10, 64)
}
