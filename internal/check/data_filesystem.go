package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

var dataFilesystemCheck = Check{
	ID:    "data-filesystem",
	Title: "The filesystem under the dataset path, and whether it crosses a network",
	// Sources: 002 Task 13, Mini-histoire 3
	run: runDataFilesystem,
}

func runDataFilesystem(e *env) []Outcome {
	if e.opts.DataPath == "" {
		return []Outcome{{Status: Absent, Claim: "no dataset path given", Need: "--data PATH (the directory the job reads its dataset from)"}}
	}
	subj := "data " + e.opts.DataPath
	src := procFile(pidDir(e.opts.PID), "mountinfo")
	mounts, err := e.targetMounts()
	if err != nil {
		return []Outcome{readFailure(subj, "mount table", src, err, "a running process: check the PID", "read access to "+src)}
	}
	m, ok := procfs.MountFor(mounts, e.opts.DataPath)
	if !ok {
		return []Outcome{{Status: Absent, Subject: subj, Claim: "no mount holds " + e.opts.DataPath, Need: "an absolute path in the target's mount namespace"}}
	}
	return []Outcome{judgeDataMount(subj, m, src)}
}

func judgeDataMount(subj string, m procfs.Mount, src string) Outcome {
	ev := []finding.Evidence{
		text("mount point", m.MountPoint, src),
		text("filesystem", m.FSType, src),
		text("source", m.Source, src),
	}
	if opts := interestingOptions(m); opts != "" {
		ev = append(ev, text("options", opts, src))
	}
	if procfs.NetworkFilesystems[m.FSType] {
		return Outcome{Status: Warn, Subject: subj, Evidence: ev, Supports: finding.StorageBound,
			Claim: fmt.Sprintf("dataset on a network filesystem (%s from %s): every read that misses the page cache crosses the network", m.FSType, m.Source),
			Decision: "Stage the dataset on local NVMe for high-throughput runs, pack small files into shards, and prefetch; " +
				"watch retransmissions and metadata calls (nfs-client, nfs-mount)."}
	}
	return Outcome{Status: OK, Subject: subj, Evidence: ev, Claim: fmt.Sprintf("dataset on a local filesystem (%s at %s)", m.FSType, m.MountPoint)}
}

// interestingOptions keeps the mount options that change read throughput.
func interestingOptions(m procfs.Mount) string {
	keep := map[string]bool{"vers": true, "proto": true, "rsize": true, "wsize": true, "nconnect": true, "actimeo": true,
		"timeo": true, "retrans": true, "hard": true, "soft": true, "noatime": true, "ro": true, "lookupcache": true}
	var parts []string
	for k, v := range m.Options {
		if !keep[k] {
			continue
		}
		if v == "" {
			parts = append(parts, k)
		} else {
			parts = append(parts, k+"="+v)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
