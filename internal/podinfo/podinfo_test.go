package podinfo

import (
	"path/filepath"
	"strings"
	"testing"
)

const (
	containerdID = "3f1c0a9e5b7d4c2a8e6f0b1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4"
	crioID       = "aa1c0a9e5b7d4c2a8e6f0b1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4"
)

var node = filepath.Join("testdata", "node")

func reader() Reader { return Reader{Proc: filepath.Join(node, "proc"), HostRoot: node} }

// TestResolve runs over a node's fixture tree: containerd's and CRI-O's
// records of a container (OCI configs as the runtimes write them, the
// container's environment and its secrets in them), and containers' own
// files seen through /proc/PID/root.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		cid  string
		env  map[string]string
		want Names
	}{
		{"containerd record", 4242, containerdID, nil,
			Names{Pod: "train-llm-0", Namespace: "ml-research", Container: "trainer", PodFrom: FromCRI, NamespaceFrom: FromCRI, ContainerFrom: FromCRI}},
		{"CRI-O record", 4242, crioID, nil,
			Names{Pod: "infer-7d9f8-x2k4q", Namespace: "serving", Container: "server", PodFrom: FromCRI, NamespaceFrom: FromCRI, ContainerFrom: FromCRI}},
		{"the record wins over the environment", 4242, containerdID, map[string]string{"POD_NAME": "other", "POD_NAMESPACE": "other"},
			Names{Pod: "train-llm-0", Namespace: "ml-research", Container: "trainer", PodFrom: FromCRI, NamespaceFrom: FromCRI, ContainerFrom: FromCRI}},
		// No record visible (the runtime's state not mounted): the service
		// account's namespace file (through the container's own /var/run
		// -> /run link, resolved inside its root) and its hostname.
		{"no record: service account and hostname", 5151, "", nil,
			Names{Pod: "batch-job-abc12", Namespace: "research", PodFrom: FromHostname, NamespaceFrom: FromServiceAccount}},
		{"downward API before the hostname", 5151, "", map[string]string{"POD_NAME": "batch-job-abc12-x", "POD_NAMESPACE": "ignored"},
			Names{Pod: "batch-job-abc12-x", Namespace: "research", PodFrom: FromEnv, NamespaceFrom: FromServiceAccount}},
		{"downward API only", 9999, "", map[string]string{"POD_NAME": "p-1", "POD_NAMESPACE": "team-a"},
			Names{Pod: "p-1", Namespace: "team-a", PodFrom: FromEnv, NamespaceFrom: FromEnv}},
		// What is not a Kubernetes name is not used.
		{"hostname not a name", 6161, "", map[string]string{"POD_NAMESPACE": "Team A"}, Names{}},
		// Links the container made that point out of its root are resolved
		// inside it: the node's files stay unread.
		{"links out of the container", 7171, "", nil, Names{}},
		{"container id not the runtime's", 4242, "../../../etc", nil, Names{Pod: "train-llm-0", PodFrom: FromHostname}},
		{"nothing", 9999, "", nil, Names{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reader().Resolve(tc.pid, tc.cid, tc.env)
			if got != tc.want {
				t.Errorf("Resolve = %+v\nwant       %+v", got, tc.want)
			}
			for _, s := range []string{got.Pod, got.Namespace, got.Container} {
				if strings.Contains(s, "secret") || strings.Contains(s, "leaked") || s == "kube-system" {
					t.Errorf("read %q from outside what it may read", s)
				}
			}
		})
	}
}
