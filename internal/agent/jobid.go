package agent

import (
	"regexp"
	"strings"

	"github.com/gpufeed/gpufeed/internal/podinfo"
)

// JobID is what ties a GPU process to the job a scheduler runs it as: the
// Slurm job, or the Kubernetes pod and container. Empty fields are not
// known. It is read from the process's cgroup paths (where slurmd's
// cgroup plugin and the kubelet place every process they start) and, for
// Slurm, from the allowlisted SLURM_JOB_ID in the process's environment.
type JobID struct {
	SlurmJobID string
	// PodUID and ContainerID are what the kubelet writes into the cgroup
	// path; the pod's name and namespace are not there (kube-state-metrics'
	// kube_pod_info carries them by uid).
	PodUID      string
	ContainerID string
	// Pod, Namespace and Container are the names, where the node holds them
	// (internal/podinfo: the container runtime's record, the pod's service
	// account namespace file, the downward API environment, the container's
	// hostname), each with where it was read; empty when none says
	// (the pod is then known by its UID only).
	Pod, Namespace, Container             string
	PodFrom, NamespaceFrom, ContainerFrom string
}

// withNames adds a Kubernetes container's names to its identity.
func (id JobID) withNames(n podinfo.Names) JobID {
	id.Pod, id.Namespace, id.Container = n.Pod, n.Namespace, n.Container
	id.PodFrom, id.NamespaceFrom, id.ContainerFrom = n.PodFrom, n.NamespaceFrom, n.ContainerFrom
	return id
}

var (
	// Slurm: /slurm/uid_1000/job_42/step_0/task_0 (cgroup v1),
	// /system.slice/slurmstepd.scope/job_42/step_0/user/task_0 (v2).
	slurmJobRe = regexp.MustCompile(`(?:^|/)job_([0-9]+)(?:/|$)`)
	// Kubernetes pod UIDs, as the cgroupfs driver writes them
	// (pod4c5d...-...) and as the systemd driver does (dashes become
	// underscores: kubepods-burstable-pod4c5d..._....slice).
	podRe = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?:/|$)`)
	// A container's cgroup: the runtime's ID (64 hex digits), bare
	// (cgroupfs) or in a systemd scope named by the runtime.
	containerRe = regexp.MustCompile(`^(?:cri-containerd-|containerd-|docker-|crio-|libpod-)?([0-9a-f]{64})(?:\.scope)?$`)
)

// ParseJobID reads a process's job identity from its cgroup paths
// (procfs.CgroupPaths) and its allowlisted environment (nil when not
// visible). The cgroup wins over the environment: a process can inherit
// SLURM_JOB_ID from a shell that left the job, not its cgroup.
func ParseJobID(cgroups []string, env map[string]string) JobID {
	var id JobID
	for _, p := range cgroups {
		if id.SlurmJobID == "" && strings.Contains(p, "slurm") {
			if m := slurmJobRe.FindStringSubmatch(p); m != nil {
				id.SlurmJobID = m[1]
			}
		}
		if id.PodUID == "" && strings.Contains(p, "kubepods") {
			if loc := podRe.FindStringSubmatchIndex(p); loc != nil {
				id.PodUID = strings.ReplaceAll(p[loc[2]:loc[3]], "_", "-")
				// The container's cgroup is the element after the pod's.
				rest := strings.TrimPrefix(p[loc[1]:], "/")
				if i := strings.IndexByte(rest, '/'); i >= 0 {
					rest = rest[:i]
				}
				if m := containerRe.FindStringSubmatch(rest); m != nil {
					id.ContainerID = m[1]
				}
			}
		}
	}
	if id.SlurmJobID == "" {
		if v := env["SLURM_JOB_ID"]; v != "" && isDigits(v) {
			id.SlurmJobID = v
		}
	}
	return id
}

func isDigits(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
