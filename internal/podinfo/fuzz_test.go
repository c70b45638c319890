package podinfo

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRecord: a runtime record holds what the pod's author wrote (its
// names, annotations, environment); whatever the bytes, reading one never
// panics and yields Kubernetes names or none.
func FuzzRecord(f *testing.F) {
	for _, p := range []string{
		filepath.Join(node, "run/containerd/io.containerd.runtime.v2.task/k8s.io", containerdID, "config.json"),
		filepath.Join(node, "run/containers/storage/overlay-containers", crioID, "userdata/config.json"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"Config":{"Labels":{"io.kubernetes.pod.name":"a\u202eb"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, rec := range records {
			a, err := rec.read(b)
			if err != nil {
				continue
			}
			n := Names{}
			if validPod(a.pod) {
				n.Pod = a.pod
			}
			for _, s := range []string{n.Pod} {
				for _, c := range s {
					if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
						t.Fatalf("name %q accepted", s)
					}
				}
			}
		}
	})
}
