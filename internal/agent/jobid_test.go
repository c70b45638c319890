package agent

import (
	"testing"
	"unicode/utf8"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

func TestParseJobID(t *testing.T) {
	const cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		name string
		file string
		env  map[string]string
		want JobID
	}{
		{"slurm cgroup v1", "12:memory:/slurm/uid_1000/job_4242/step_0/task_1\n11:cpuset:/slurm/uid_1000/job_4242/step_0\n", nil, JobID{SlurmJobID: "4242"}},
		{"slurm cgroup v2", "0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n", nil, JobID{SlurmJobID: "77"}},
		{"slurm env only", "0::/user.slice/user-1000.slice/session-3.scope\n", map[string]string{"SLURM_JOB_ID": "9"}, JobID{SlurmJobID: "9"}},
		{"cgroup wins over env", "0::/system.slice/slurmstepd.scope/job_5/step_0\n", map[string]string{"SLURM_JOB_ID": "6"}, JobID{SlurmJobID: "5"}},
		{"env not a number", "0::/\n", map[string]string{"SLURM_JOB_ID": "5; rm"}, JobID{}},
		{"job_ outside slurm", "0::/user.slice/job_5\n", nil, JobID{}},
		{"k8s cgroupfs", "12:memory:/kubepods/burstable/pod4c5d1a2b-0000-4111-8222-0123456789ab/" + cid + "\n", nil,
			JobID{PodUID: "4c5d1a2b-0000-4111-8222-0123456789ab", ContainerID: cid}},
		{"k8s systemd containerd", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod4c5d1a2b_0000_4111_8222_0123456789ab.slice/cri-containerd-" + cid + ".scope\n", nil,
			JobID{PodUID: "4c5d1a2b-0000-4111-8222-0123456789ab", ContainerID: cid}},
		{"k8s pod cgroup only (pause)", "0::/kubepods/besteffort/pod4c5d1a2b-0000-4111-8222-0123456789ab\n", nil,
			JobID{PodUID: "4c5d1a2b-0000-4111-8222-0123456789ab"}},
		{"neither", "0::/user.slice/user-1000.slice/session-3.scope\n", nil, JobID{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			paths, err := procfs.ParseCgroupPaths("cgroup", []byte(c.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := ParseJobID(paths, c.env); got != c.want {
				t.Errorf("ParseJobID = %+v, want %+v", got, c.want)
			}
		})
	}
}

// FuzzParseJobID: cgroup paths are named by whoever creates the cgroup;
// whatever they hold, the labels are digits, a UUID and hex only.
func FuzzParseJobID(f *testing.F) {
	f.Add("0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n", "")
	f.Add("0::/kubepods.slice/kubepods-pod4c5d1a2b_0000_4111_8222_0123456789ab.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n", "12")
	f.Add("x", "\xff")
	f.Fuzz(func(t *testing.T, file, env string) {
		paths, err := procfs.ParseCgroupPaths("cgroup", []byte(file))
		if err != nil {
			return
		}
		id := ParseJobID(paths, map[string]string{"SLURM_JOB_ID": env})
		for _, s := range []string{id.SlurmJobID, id.PodUID, id.ContainerID} {
			if !utf8.ValidString(s) {
				t.Fatalf("label %q not UTF-8", s)
			}
			for _, r := range s {
				if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r == '-') {
					t.Fatalf("label %q holds %q", s, r)
				}
			}
		}
	})
}
