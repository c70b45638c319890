package frozen

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// fdFindings reports processes whose descriptors grow toward, or sit near,
// the soft RLIMIT_NOFILE, with the projected time to EMFILE and the kinds.
func fdFindings(v *view, a *derive.View) []finding.Finding {
	var out []finding.Finding
	for _, ap := range a.Procs {
		pid := ap.Key.PID
		p := v.procs[pid]
		if p == nil || ap.NoFileSoft == nil || *ap.NoFileSoft == 0 || *ap.NoFileSoft == timeline.Unlimited {
			continue
		}
		soft := float64(*ap.NoFileSoft)
		current, li := ap.FDs.Last()
		if li < 0 {
			continue
		}
		firstN, fi := ap.FDs.First()
		n := 0
		for _, x := range ap.FDs {
			if !math.IsNaN(x) {
				n++
			}
		}
		span := time.Duration(a.TickT[li] - a.TickT[fi])
		rate := 0.0
		if n >= thresholds.FDMinSamples && span >= thresholds.FDMinSpan && !math.IsNaN(ap.FDGrowth) {
			rate = ap.FDGrowth
		}
		left := soft - current
		var eta time.Duration
		leaking := rate >= thresholds.FDMinRate && current-firstN >= thresholds.FDMinGrowth
		if leaking {
			// Sustained: a rank opens its libraries, device handles and
			// sockets in its first seconds and then holds them; a leak keeps
			// growing in the window's later half too.
			mid := (a.TickT[fi] + a.TickT[li]) / 2
			m := fi
			for m < li && a.TickT[m] < mid {
				m++
			}
			later := ap.FDs[m : li+1].Slope(a.TickT[m : li+1])
			leaking = !math.IsNaN(later) && later >= thresholds.FDMinRate
		}
		if leaking {
			eta = time.Duration(max(left, 0) / rate * float64(time.Second))
			leaking = eta <= thresholds.FDHorizon
		}
		near := current >= thresholds.FDNearFraction*soft
		if !leaking && !near {
			continue
		}
		name := v.procName(pid)
		// Sources: 004 (File descriptor exhaustion)
		f := finding.Finding{ID: "fd-exhaustion", Severity: finding.Warning, Subject: name}
		f.Evidence = []finding.Evidence{
			{What: "open file descriptors", Value: current, Window: "at the end of the window", Source: "/proc/" + strconv.Itoa(pid) + "/fd"},
			{What: "soft limit (RLIMIT_NOFILE)", Value: soft, Source: "/proc/" + strconv.Itoa(pid) + "/limits"},
		}
		if rate != 0 {
			f.Evidence = append(f.Evidence, finding.Evidence{What: "growth", Value: round(rate, 2), Unit: "fds/s", Window: fmt.Sprintf("least-squares slope of %d samples over %s", n, fmtSeconds(span)), Source: "/proc/" + strconv.Itoa(pid) + "/fd"})
		}
		if leaking {
			f.Claim = fmt.Sprintf("%s leaks file descriptors: %.0f open of a soft limit of %.0f, %.1f more every second: it hits EMFILE (\"Too many open files\") in %s", name, current, soft, rate, fmtDuration(eta))
			f.Evidence = append(f.Evidence, finding.Evidence{What: "projected time until EMFILE", Value: round(eta.Seconds(), 0), Unit: "s", Window: "linear projection of the window's rate", Source: "growth and soft limit above"})
		} else {
			f.Claim = fmt.Sprintf("%s holds %.0f file descriptors of a soft limit of %.0f: one burst from EMFILE", name, current, soft)
		}
		if current >= thresholds.FDCriticalFraction*soft || (leaking && eta <= thresholds.FDCriticalHorizon) {
			f.Severity = finding.Critical
		}
		if kinds := describeKinds(p.FDKinds); kinds != "" {
			f.Claim += "; " + kinds
			f.Evidence = append(f.Evidence, finding.Evidence{What: "what they are", Text: kinds, Window: "read once near the end of the window", Source: "/proc/" + strconv.Itoa(pid) + "/fd (link targets)"})
		}
		f.Decision = "Close what is opened per sample (a `with open(...)` per item, sockets returned to a pool); the lasting fix is to open fewer handles: one mmap'd file or an Arrow/Parquet reader instead of a file per sample. Raising the limit (`ulimit -n 65536`, or /etc/security/limits.conf to persist) only buys time."
		out = append(out, f)
	}
	return out
}

// describeKinds writes "200 files (180 under /data/shards), 40 sockets".
func describeKinds(k *timeline.FDKinds) string {
	if k == nil {
		return ""
	}
	type kc struct {
		kind string
		n    int
	}
	var ks []kc
	for kind, n := range k.ByKind {
		if n > 0 {
			ks = append(ks, kc{kind, n})
		}
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].n != ks[j].n {
			return ks[i].n > ks[j].n
		}
		return ks[i].kind < ks[j].kind
	})
	var parts []string
	for _, x := range ks {
		name := map[string][2]string{"file": {"file", "files"}, "socket": {"socket", "sockets"}, "pipe": {"pipe end", "pipe ends"},
			"anon_inode": {"anonymous inode (eventfd, epoll)", "anonymous inodes (eventfd, epoll)"}, "nvidia": {"NVIDIA device handle", "NVIDIA device handles"},
			"device": {"device", "devices"}, "memfd": {"memfd", "memfds"}}[x.kind]
		if name[0] == "" {
			name = [2]string{x.kind, x.kind}
		}
		s := plural(x.n, name[0], name[1])
		if x.kind == "file" && len(k.TopDirs) > 0 {
			s += " (" + strconv.Itoa(k.TopDirs[0].N) + " under " + safe(k.TopDirs[0].Dir) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
