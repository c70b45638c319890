package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
)

const (
	// nfsRetransWarnFraction: 002 Task 13 reads 1203 retransmissions in
	// 248391 calls (0.48%) as a problem; a healthy network retransmits
	// almost nothing, so a thousandth is the line.
	nfsRetransWarnFraction = 0.001
	// nfsMetadataPerReadWarn: more metadata calls (getattr, lookup,
	// access, open) than reads is the "metadata chatter" of 002 Task 13
	// (411802 getattr + 50322 open against 182744 reads).
	nfsMetadataPerReadWarn = 1.0
)

var nfsClientCheck = Check{
	ID:    "nfs-client",
	Title: "NFS client RPC retransmissions and metadata chatter (/proc/net/rpc/nfs)",
	// Sources: 002 Task 13
	run: runNFSClient,
}

func runNFSClient(e *env) []Outcome {
	src := procFile("net/rpc/nfs")
	c, err := e.fs.NFSClient()
	if err != nil {
		return []Outcome{readFailure("", "NFS client statistics", src, err, "an NFS client (the nfs module is not loaded here)", "read access to /proc/net")}
	}
	if c.Calls == 0 {
		return []Outcome{{Status: OK, Claim: "no NFS client calls", Evidence: []finding.Evidence{num("RPC calls", 0, "", src)}}}
	}
	ratio := float64(c.Retransmissions) / float64(c.Calls)
	ev := []finding.Evidence{
		{What: "RPC calls", Value: float64(c.Calls), Window: "since boot", Source: src},
		{What: "RPC retransmissions", Value: float64(c.Retransmissions), Window: "since boot", Source: src},
		{What: "retransmitted", Value: ratio * 100, Unit: "%", Window: "since boot", Source: src},
	}
	meta := c.Ops["getattr"] + c.Ops["lookup"] + c.Ops["access"] + c.Ops["open"]
	reads := c.Ops["read"]
	for _, op := range []string{"read", "getattr", "lookup", "access", "open"} {
		if v, ok := c.Ops[op]; ok {
			ev = append(ev, finding.Evidence{What: "NFSv" + c.Version + " " + op + " calls", Value: float64(v), Window: "since boot", Source: src})
		}
	}
	var problems []string
	if ratio >= nfsRetransWarnFraction {
		problems = append(problems, fmt.Sprintf("%.2f%% of RPC calls retransmitted", ratio*100))
	}
	if reads > 0 && float64(meta)/float64(reads) >= nfsMetadataPerReadWarn {
		problems = append(problems, fmt.Sprintf("%.1f metadata calls per read", float64(meta)/float64(reads)))
	} else if reads == 0 && meta > 0 {
		problems = append(problems, fmt.Sprintf("%d metadata calls and no reads", meta))
	}
	if len(problems) > 0 {
		claim := "NFS client: " + problems[0]
		if len(problems) > 1 {
			claim += ", " + problems[1]
		}
		return []Outcome{{Status: Warn, Evidence: ev, Supports: finding.StorageBound, Claim: claim,
			Decision: "Stage the dataset on local NVMe, cut the file count (shards instead of one file per sample), raise " +
				"client attribute caching where safe (actimeo), and have the network checked for the retransmissions."}}
	}
	return []Outcome{{Status: OK, Evidence: ev, Claim: fmt.Sprintf("NFS client: %.3f%% retransmitted, metadata calls in proportion", ratio*100)}}
}
