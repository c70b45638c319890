package frozen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// safe escapes attacker-controlled text (process names, command lines,
// kernel lines) before it enters a claim (safetext.Escape: the one
// sanitiser).
func safe(s string) string { return safetext.Escape(s) }

// fmtBytes writes a byte count in binary units: "80.3 GiB".
func fmtBytes(b float64) string { return safetext.Bytes(b, 1, 1) }

// fmtSeconds writes a window length: "10.0 s".
func fmtSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s" }

// fmtDuration writes a projected time: "42 s", "17 min", "3.5 h", "2.1 days".
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.0f min", d.Minutes())
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return fmt.Sprintf("%.1f days", d.Hours()/24)
}

// rankRanges writes a set of ranks compactly: "0-2,5".
func rankRanges(ranks []int) string {
	sort.Ints(ranks)
	var parts []string
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ranks[i]))
		} else {
			parts = append(parts, strconv.Itoa(ranks[i])+"-"+strconv.Itoa(ranks[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// plural writes "1 thread" / "3 threads".
func plural(n int, one, many string) string { return safetext.Count(n, one, many) }
