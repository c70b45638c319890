package check

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

var nfsMountCheck = Check{
	ID:    "nfs-mount",
	Title: "Per-mount NFS operations, retransmissions and timeouts (mountstats)",
	// Sources: 002 Task 13
	run: runNFSMount,
}

func runNFSMount(e *env) []Outcome {
	src := procFile(pidDir(e.opts.PID), "mountstats")
	mounts, err := e.fs.NFSMounts(e.opts.PID)
	if err != nil {
		return []Outcome{readFailure(e.subjectPID(), "NFS mount statistics", src, err, "a running process: check the PID", needPtrace)}
	}
	if len(mounts) == 0 {
		return []Outcome{{Status: Absent, Subject: e.subjectPID(), Claim: "no NFS mount in the mount table", Need: "an NFS mount"}}
	}
	var out []Outcome
	for _, m := range mounts {
		out = append(out, judgeNFSMount(m, e.opts.DataPath, src))
	}
	return out
}

func judgeNFSMount(m procfs.NFSMount, dataPath, src string) Outcome {
	subj := "NFS " + m.MountPoint
	if dataPath != "" {
		p := path.Clean("/" + dataPath)
		if p == m.MountPoint || strings.HasPrefix(p, strings.TrimSuffix(m.MountPoint, "/")+"/") {
			subj += nfsHoldsData
		}
	}
	var req, retrans, timeouts, rtt uint64
	ops := append([]procfs.NFSOp(nil), m.Ops...)
	for _, op := range ops {
		req += op.Requests
		retrans += op.Retransmissions()
		timeouts += op.MajorTimeouts
		rtt += op.RTTMillis
	}
	window := fmt.Sprintf("over the mount's %s", m.Age.Round(1e9))
	ev := []finding.Evidence{
		text("server export", m.Device, src),
		{What: "operations", Value: float64(req), Window: window, Source: src},
		{What: "retransmissions", Value: float64(retrans), Window: window, Source: src},
		{What: "major timeouts", Value: float64(timeouts), Window: window, Source: src},
	}
	if req > 0 {
		ev = append(ev, finding.Evidence{What: "average round trip", Value: float64(rtt) / float64(req), Unit: "ms", Window: window, Source: src})
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Requests != ops[j].Requests {
			return ops[i].Requests > ops[j].Requests
		}
		return ops[i].Name < ops[j].Name
	})
	var top []string
	for i, op := range ops {
		if i == 4 || op.Requests == 0 {
			break
		}
		top = append(top, fmt.Sprintf("%s %d", op.Name, op.Requests))
	}
	if len(top) > 0 {
		ev = append(ev, text("busiest operations", strings.Join(top, ", "), src))
	}
	if req > 0 && (float64(retrans)/float64(req) >= nfsRetransWarnFraction || timeouts > 0) {
		return Outcome{Status: Warn, Subject: subj, Evidence: ev, Supports: finding.StorageBound,
			Claim: fmt.Sprintf("%d retransmissions (%.2f%%) and %d major timeouts in %d operations", retrans, 100*float64(retrans)/float64(req), timeouts, req),
			Decision: "Requests to this server are being lost or answered late: check the network path and server load, " +
				"and stage hot data locally."}
	}
	return Outcome{Status: OK, Subject: subj, Evidence: ev, Claim: fmt.Sprintf("%d operations, %d retransmitted", req, retrans)}
}
