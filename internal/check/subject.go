package check

import (
	"strings"
)

// ownProcess is the subject of the per-process checks run without a
// target (--pid): gpufeed's own process.
const ownProcess = "gpufeed's own process (no --pid)"

// SubjectID is the identifier of an outcome's subject, for where a value
// must be an identifier (a metric's label) while the subject itself is
// written for a person (the report): a path, a PCI address, a GPU, a pid's
// /proc directory. Each form the checks write maps to one:
//
//	pid 4242                          /proc/4242
//	gpufeed's own process (no --pid)  /proc/self
//	/dev/shm of pid 4242              /proc/4242/root/dev/shm
//	data /datasets/x                  /datasets/x
//	NFS /mnt/data (holds --data)      /mnt/data
//	GPU0 00000000:81:00.0             00000000:81:00.0 (GPU0 without one)
//	GPU 0000:81:00.0, NVMe ..., network ...  the PCI address
//	memory pressure                   /proc/pressure/memory
//
// A subject of another form (none the checks write) is returned with its
// spaces as underscores, so that it stays one token.
func SubjectID(subject string) string {
	switch {
	case subject == "":
		return ""
	case subject == ownProcess:
		return "/proc/self"
	case strings.HasPrefix(subject, "pid "):
		return "/proc/" + strings.TrimPrefix(subject, "pid ")
	case strings.HasPrefix(subject, "/dev/shm of "):
		return SubjectID(strings.TrimPrefix(subject, "/dev/shm of ")) + "/root/dev/shm"
	case strings.HasSuffix(subject, " pressure"):
		return "/proc/pressure/" + strings.TrimSuffix(subject, " pressure")
	case strings.HasPrefix(subject, "data "):
		return strings.TrimPrefix(subject, "data ")
	case strings.HasPrefix(subject, "NFS "):
		return strings.TrimSuffix(strings.TrimPrefix(subject, "NFS "), nfsHoldsData)
	}
	if kind, addr, ok := strings.Cut(subject, " "); ok && !strings.Contains(addr, " ") &&
		(kind == "NVMe" || kind == "network" || strings.HasPrefix(kind, "GPU")) {
		return addr // GPU0 00000000:81:00.0: the bus id; NVMe 0000:01:00.0
	}
	if !strings.Contains(subject, " ") {
		return subject // GPU0 without a bus id
	}
	return strings.ReplaceAll(subject, " ", "_")
}

// nfsHoldsData marks the NFS mount that holds --data in its subject.
const nfsHoldsData = " (holds --data)"
