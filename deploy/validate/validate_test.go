// Package validate checks the deployment files against the Kubernetes and
// Prometheus Operator API types, decoding them strictly (an unknown or
// misspelt field is an error), and checks what they must say for the agent:
// read-only mounts, the least capabilities, labels and ports that agree.
// The Helm chart (deploy/helm/gpufeed) is rendered with Helm's own engine
// and held to the same checks (helm_test.go). It is a module of its own so
// that the API types and Helm stay out of gpufeed's dependencies.
package validate

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const dir = "../kubernetes"

func decode(t *testing.T, name string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	decodeBytes(t, name, b, into)
}

// decodeBytes decodes one YAML document strictly into an API type.
func decodeBytes(t *testing.T, name string, b []byte, into any) {
	t.Helper()
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// As the API server decodes: field names match case-sensitively, and
	// an unknown or repeated field is an error.
	strict, err := kjson.UnmarshalStrict(j, into)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, e := range strict {
		t.Errorf("%s: %v", name, e)
	}
}

// operatorDir holds what only a cluster running the Prometheus Operator
// accepts: kubectl apply -f deploy/kubernetes/ does not descend into it.
const operatorDir = "prometheus-operator"

func TestEveryFileIsValidated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	known := []string{"00-namespace.yaml", "daemonset.yaml", "service.yaml", "networkpolicy.yaml",
		operatorDir + "/servicemonitor.yaml"}
	for _, f := range append(files, more...) {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(known, filepath.ToSlash(rel)) {
			t.Errorf("%s is not validated by this test", f)
		}
	}
}

// builtinGroups are the API groups every Kubernetes cluster serves (""
// is the core group, apiVersion v1).
var builtinGroups = []string{"", "apps", "batch", "networking.k8s.io", "policy", "rbac.authorization.k8s.io",
	"scheduling.k8s.io", "node.k8s.io", "storage.k8s.io"}

// apiGroups lists the API group of each document of a manifest file.
func apiGroups(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for i, doc := range strings.Split(string(b), "\n---") {
		var head struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%s document %d: %v", path, i+1, err)
		}
		if head.APIVersion == "" {
			continue // comments only
		}
		g, _, ok := strings.Cut(head.APIVersion, "/")
		if !ok {
			g = ""
		}
		groups = append(groups, g)
	}
	return groups
}

// TestPlainApplyNeedsNoCRD: kubectl apply -f deploy/kubernetes/ applies
// every file of the directory (not its subdirectories) and fails on a
// kind the cluster does not serve, so the top level holds built-in kinds
// only; the Prometheus Operator's go under prometheus-operator/, applied
// where the operator runs.
func TestPlainApplyNeedsNoCRD(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		for _, g := range apiGroups(t, f) {
			if !slices.Contains(builtinGroups, g) {
				t.Errorf("%s holds a kind of API group %q, which a cluster without its CRDs refuses: "+
					"kubectl apply -f deploy/kubernetes/ would fail there; move it to a subdirectory", f, g)
			}
		}
	}
	ops, _ := filepath.Glob(filepath.Join(dir, operatorDir, "*.yaml"))
	if len(ops) == 0 {
		t.Fatalf("no manifest in %s", filepath.Join(dir, operatorDir))
	}
	for _, f := range ops {
		for _, g := range apiGroups(t, f) {
			if g != "monitoring.coreos.com" {
				t.Errorf("%s holds a kind of API group %q: only the Prometheus Operator's belong there", f, g)
			}
		}
	}
}

func TestDaemonSet(t *testing.T) {
	var ds appsv1.DaemonSet
	decode(t, "daemonset.yaml", &ds)
	checkDaemonSet(t, &ds)
	// Reading another user's /proc/PID/fd, environ, syscall and smaps
	// needs both: DAC_READ_SEARCH to open them (the user's, mode 0400),
	// SYS_PTRACE for the kernel's ptrace read check (measured in a
	// container: either alone is refused). SYSLOG reads the kernel log.
	if add := ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add; !slices.Equal(add, []corev1.Capability{"SYS_PTRACE", "DAC_READ_SEARCH", "SYSLOG"}) {
		t.Errorf("adds %v, want SYS_PTRACE, DAC_READ_SEARCH and SYSLOG", add)
	}
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != madeImage(t) {
		t.Errorf("image %s, want %s: the image make image builds", img, madeImage(t))
	}
}

// madeImage is the image make image builds (scripts/image.sh).
func madeImage(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("../../scripts/image.sh", "--image")
	cmd.Env = append(os.Environ(), "IMAGE=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/image.sh --image: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestNamespace: kubectl apply -f deploy/kubernetes/ creates the
// namespace first (files are applied in name order), and its Pod Security
// level admits what the agent needs (hostPID, SYS_PTRACE: privileged).
func TestNamespace(t *testing.T) {
	var ns corev1.Namespace
	decode(t, "00-namespace.yaml", &ns)
	var ds appsv1.DaemonSet
	decode(t, "daemonset.yaml", &ds)
	if ns.Kind != "Namespace" || ns.APIVersion != "v1" || ns.Name != ds.Namespace {
		t.Errorf("%s/%s %s, want the v1 Namespace %s the DaemonSet is in", ns.APIVersion, ns.Kind, ns.Name, ds.Namespace)
	}
	if lvl := ns.Labels["pod-security.kubernetes.io/enforce"]; lvl != "privileged" {
		t.Errorf("pod-security.kubernetes.io/enforce=%q: the baseline level refuses hostPID and SYS_PTRACE", lvl)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 || filepath.Base(files[0]) != "00-namespace.yaml" {
		t.Errorf("files in order %v: the namespace must come first", files)
	}
}

// checkDaemonSet checks what the agent's DaemonSet must say, however it was
// written (the plain manifest, the Helm chart's rendering).
func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	if ds.Kind != "DaemonSet" || ds.APIVersion != "apps/v1" {
		t.Errorf("kind %s/%s", ds.APIVersion, ds.Kind)
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Error("hostPID is off: the agent would see its own container's processes only")
	}
	if spec.HostNetwork {
		t.Error("hostNetwork is on: the agent needs none")
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod's labels %v", k, v, ds.Spec.Template.Labels)
		}
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want the agent's", len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || (sc.Privileged != nil && *sc.Privileged) {
		t.Fatalf("security context %+v: want no privilege escalation, a read-only root, not privileged", sc)
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("drops %v, want ALL", sc.Capabilities.Drop)
	}
	for _, add := range sc.Capabilities.Add {
		if add != "SYS_PTRACE" && add != "DAC_READ_SEARCH" && add != "SYSLOG" {
			t.Errorf("adds %s: the agent needs SYS_PTRACE and DAC_READ_SEARCH (other users' /proc/PID files) and SYSLOG (the kernel log) only", add)
		}
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
			// An unprivileged container's device cgroup refuses to
			// open a device node it was not given (/dev/kmsg: the
			// kernel log is read through syslog(2) instead).
			if strings.HasPrefix(v.HostPath.Path, "/dev/") || v.HostPath.Type != nil &&
				(*v.HostPath.Type == corev1.HostPathCharDev || *v.HostPath.Type == corev1.HostPathBlockDev) {
				t.Errorf("volume %s mounts the device %s: an unprivileged container cannot open it", v.Name, v.HostPath.Path)
			}
		}
	}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("volume %s mounted read-write at %s: the agent only reads", m.Name, m.MountPath)
		}
		// Under --host-root, a node's directory sits at its own path.
		if p, ok := hostPaths[m.Name]; ok && strings.HasPrefix(m.MountPath, "/host/run/") && m.MountPath != "/host"+p {
			t.Errorf("volume %s (%s) mounted at %s: under --host-root=/host it must be /host%s", m.Name, p, m.MountPath, p)
		}
		// The runtime's socket would let the agent start containers.
		if p := hostPaths[m.Name]; p == "/run" || p == "/run/containerd" || p == "/var/run" || strings.HasSuffix(p, ".sock") {
			t.Errorf("volume %s mounts %s: the container runtime's socket is in reach", m.Name, p)
		}
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--hostname=$(NODE_NAME)", "--sys-root=/host/sys", "--listen=$(POD_IP):9847", "--host-root=/host"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["NODE_NAME"] != "spec.nodeName" || env["POD_IP"] != "status.podIP" {
		t.Errorf("downward API env %v: want NODE_NAME from spec.nodeName, POD_IP from status.podIP", env)
	}
	if c.Resources.Limits.Memory().IsZero() {
		t.Error("no memory limit")
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9847 {
		t.Errorf("ports %+v, want metrics 9847", c.Ports)
	}
	if p := c.ReadinessProbe; p == nil || (p.HTTPGet == nil || p.HTTPGet.Port.String() != "metrics") && (p.TCPSocket == nil || p.TCPSocket.Port.String() != "metrics") {
		t.Errorf("readiness probe %+v: want the metrics port probed", p)
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("runAsUser %v: the added capabilities reach the agent only as root (allowPrivilegeEscalation: false refuses file capabilities)", sc.RunAsUser)
	}
}

func TestServiceAndServiceMonitor(t *testing.T) {
	var ds appsv1.DaemonSet
	decode(t, "daemonset.yaml", &ds)
	var svc corev1.Service
	decode(t, "service.yaml", &svc)
	var sm monitoringv1.ServiceMonitor
	decode(t, "prometheus-operator/servicemonitor.yaml", &sm)
	checkService(t, &ds, &svc, &sm)
}

// checkService checks that the Service selects the agents and the
// ServiceMonitor the Service.
func checkService(t *testing.T, ds *appsv1.DaemonSet, svc *corev1.Service, sm *monitoringv1.ServiceMonitor) {
	t.Helper()
	for k, v := range svc.Spec.Selector {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("service selector %s=%s selects no agent pod (labels %v)", k, v, ds.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" || svc.Spec.Ports[0].Name != "metrics" {
		t.Errorf("service ports %+v, want metrics to the pod's metrics port", svc.Spec.Ports)
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selector %s=%s selects no service (labels %v)", k, v, svc.Labels)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || !sm.Spec.Endpoints[0].HonorLabels {
		t.Errorf("endpoints %+v, want the metrics port with honorLabels (the agent's Hostname label)", sm.Spec.Endpoints)
	}
	if sm.Namespace != svc.Namespace || svc.Namespace != ds.Namespace {
		t.Errorf("namespaces %s, %s, %s differ", ds.Namespace, svc.Namespace, sm.Namespace)
	}
}

func TestNetworkPolicy(t *testing.T) {
	var ds appsv1.DaemonSet
	decode(t, "daemonset.yaml", &ds)
	var np networkingv1.NetworkPolicy
	decode(t, "networkpolicy.yaml", &np)
	checkNetworkPolicy(t, &ds, &np)
}

// checkNetworkPolicy checks that the policy selects the agents' pods,
// admits traffic from a selected source only (no empty peer: that would be
// every pod), and to the metrics port only.
func checkNetworkPolicy(t *testing.T, ds *appsv1.DaemonSet, np *networkingv1.NetworkPolicy) {
	t.Helper()
	if np.Kind != "NetworkPolicy" || np.APIVersion != "networking.k8s.io/v1" {
		t.Errorf("kind %s/%s", np.APIVersion, np.Kind)
	}
	if np.Namespace != ds.Namespace {
		t.Errorf("NetworkPolicy in %s, the agents in %s", np.Namespace, ds.Namespace)
	}
	if len(np.Spec.PodSelector.MatchLabels) == 0 {
		t.Error("the NetworkPolicy selects every pod of the namespace, not the agents")
	}
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("NetworkPolicy selector %s=%s selects no agent pod (labels %v)", k, v, ds.Spec.Template.Labels)
		}
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("policy types %v: want Ingress", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) == 0 {
		t.Fatal("no ingress rule: Prometheus could not scrape the agents")
	}
	for _, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			t.Error("an ingress rule admits every source")
		}
		for _, p := range r.From {
			if p.PodSelector == nil && p.NamespaceSelector == nil && p.IPBlock == nil ||
				p.NamespaceSelector != nil && len(p.NamespaceSelector.MatchLabels) == 0 && len(p.NamespaceSelector.MatchExpressions) == 0 && p.PodSelector == nil {
				t.Errorf("ingress peer %+v admits every namespace", p)
			}
		}
		if len(r.Ports) != 1 || r.Ports[0].Port == nil || r.Ports[0].Port.String() != "metrics" {
			t.Errorf("ingress ports %+v, want the metrics port only", r.Ports)
		}
	}
}
