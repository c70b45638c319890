package validate

import (
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"golang.org/x/crypto/bcrypt"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../helm/gpufeed"

// rendered is one rendering of the chart, decoded strictly.
type rendered struct {
	ds  *appsv1.DaemonSet
	svc *corev1.Service
	sm  *monitoringv1.ServiceMonitor
	np  *networkingv1.NetworkPolicy
	sec *corev1.Secret
}

// render renders the chart with Helm's own engine, as helm template does
// (release gpufeed in namespace gpufeed), and decodes every object it
// writes strictly into its API type: a field the API does not know fails.
func render(t *testing.T, values map[string]any) (rendered, error) {
	t.Helper()
	return renderOn(t, values, chartutil.DefaultCapabilities)
}

// withOperator is a cluster that serves the Prometheus Operator's
// ServiceMonitor (what helm install sees there, helm template
// --api-versions monitoring.coreos.com/v1/ServiceMonitor).
var withOperator = func() *chartutil.Capabilities {
	c := *chartutil.DefaultCapabilities
	c.APIVersions = append(append(chartutil.VersionSet{}, c.APIVersions...), "monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor")
	return &c
}()

// renderOn renders the chart for a cluster of the given capabilities.
func renderOn(t *testing.T, values map[string]any, caps *chartutil.Capabilities) (rendered, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	if err := ch.Validate(); err != nil {
		t.Fatalf("the chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "gpufeed", Namespace: "gpufeed", IsInstall: true, Revision: 1},
		caps)
	if err != nil {
		return rendered{}, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return rendered{}, err
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var r rendered
	for _, name := range names {
		if strings.HasSuffix(name, ".tpl") {
			continue
		}
		decodeDocs(t, name, files[name], &r)
	}
	return r, nil
}

// TestHelmChartRendersThePlainManifests: with its default values, on a
// cluster with the Prometheus Operator, the chart renders the objects of
// deploy/kubernetes, spec for spec; its labels are theirs plus Helm's own.
func TestHelmChartRendersThePlainManifests(t *testing.T) {
	r, err := renderOn(t, nil, withOperator)
	if err != nil {
		t.Fatal(err)
	}
	if r.ds == nil || r.svc == nil || r.sm == nil || r.np == nil {
		t.Fatalf("rendered %+v: want a DaemonSet, a Service, a ServiceMonitor and a NetworkPolicy", r)
	}
	if r.sec != nil {
		t.Error("the default values render a Secret: the detail is served to authenticated clients only when asked")
	}
	checkDaemonSet(t, r.ds)
	checkService(t, r.ds, r.svc, r.sm)
	checkNetworkPolicy(t, r.ds, r.np)
	var np networkingv1.NetworkPolicy
	decode(t, "networkpolicy.yaml", &np)
	var ds appsv1.DaemonSet
	decode(t, "daemonset.yaml", &ds)
	var svc corev1.Service
	decode(t, "service.yaml", &svc)
	var sm monitoringv1.ServiceMonitor
	decode(t, "prometheus-operator/servicemonitor.yaml", &sm)
	for _, c := range []struct {
		what        string
		chart, file any
		chartLabels map[string]string
		fileLabels  map[string]string
		chartName   string
		fileName    string
	}{
		{"DaemonSet", r.ds.Spec, ds.Spec, r.ds.Labels, ds.Labels, r.ds.Namespace + "/" + r.ds.Name, ds.Namespace + "/" + ds.Name},
		{"Service", r.svc.Spec, svc.Spec, r.svc.Labels, svc.Labels, r.svc.Namespace + "/" + r.svc.Name, svc.Namespace + "/" + svc.Name},
		{"ServiceMonitor", r.sm.Spec, sm.Spec, r.sm.Labels, sm.Labels, r.sm.Namespace + "/" + r.sm.Name, sm.Namespace + "/" + sm.Name},
		{"NetworkPolicy", r.np.Spec, np.Spec, r.np.Labels, np.Labels, r.np.Namespace + "/" + r.np.Name, np.Namespace + "/" + np.Name},
	} {
		if !reflect.DeepEqual(c.chart, c.file) {
			a, _ := yaml.Marshal(c.chart)
			b, _ := yaml.Marshal(c.file)
			t.Errorf("%s: the chart's spec differs from deploy/kubernetes':\nchart:\n%s\nfile:\n%s", c.what, a, b)
		}
		if c.chartName != c.fileName {
			t.Errorf("%s: named %s, the file %s", c.what, c.chartName, c.fileName)
		}
		for k, v := range c.fileLabels {
			if c.chartLabels[k] != v {
				t.Errorf("%s: label %s=%s missing from the chart's %v", c.what, k, v, c.chartLabels)
			}
		}
	}
}

// TestHelmChartValues: the values change what they say and nothing else.
func TestHelmChartValues(t *testing.T) {
	records := func(r rendered) (mount, host string) {
		for _, m := range r.ds.Spec.Template.Spec.Containers[0].VolumeMounts {
			if strings.HasSuffix(m.Name, "-records") {
				mount = m.MountPath
			}
		}
		for _, v := range r.ds.Spec.Template.Spec.Volumes {
			if strings.HasSuffix(v.Name, "-records") {
				host = v.HostPath.Path
			}
		}
		return mount, host
	}
	r, err := render(t, map[string]any{"criRecords": "crio", "serviceMonitor": map[string]any{"enabled": false},
		"image": map[string]any{"repository": "registry.example/gpufeed-agent", "tag": "1.2.3"}, "extraArgs": []any{"--window=2m"}})
	if err != nil {
		t.Fatal(err)
	}
	checkDaemonSet(t, r.ds)
	if m, h := records(r); m != "/host/run/containers/storage/overlay-containers" || h != "/run/containers/storage/overlay-containers" {
		t.Errorf("criRecords=crio mounts %s at %s", h, m)
	}
	if r.sm != nil {
		t.Error("serviceMonitor.enabled=false still renders a ServiceMonitor")
	}
	c := r.ds.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/gpufeed-agent:1.2.3" || c.Args[len(c.Args)-1] != "--window=2m" {
		t.Errorf("image %s, args %v", c.Image, c.Args)
	}
	r, err = render(t, map[string]any{"criRecords": "none"})
	if err != nil {
		t.Fatal(err)
	}
	if m, h := records(r); m != "" || h != "" {
		t.Errorf("criRecords=none still mounts %s at %s", h, m)
	}
	if _, err := render(t, map[string]any{"criRecords": "docker.sock"}); err == nil || !strings.Contains(err.Error(), "want containerd, crio or none") {
		t.Errorf("criRecords=docker.sock: %v, want a render error saying what it takes", err)
	}
}

// TestHelmChartDetailAuth: detailAuth.enabled generates a password, gives
// the agent a web configuration holding its bcrypt hash (so that the agent
// serves the details to authenticated clients), and the ServiceMonitor the
// same user and password; the readiness probe no longer asks HTTP.
func TestHelmChartDetailAuth(t *testing.T) {
	r, err := renderOn(t, map[string]any{"detailAuth": map[string]any{"enabled": true}, "networkPolicy": map[string]any{"enabled": false}}, withOperator)
	if err != nil {
		t.Fatal(err)
	}
	if r.np != nil {
		t.Error("networkPolicy.enabled=false still renders a NetworkPolicy")
	}
	checkDaemonSet(t, r.ds)
	if r.sec == nil {
		t.Fatal("no Secret rendered")
	}
	user, pass, web := r.sec.StringData["username"], r.sec.StringData["password"], r.sec.StringData["web.yml"]
	if user == "" || len(pass) < 32 {
		t.Fatalf("user %q, password of %d characters: want a user and a generated password of 32", user, len(pass))
	}
	var conf struct {
		Users map[string]string `json:"basic_auth_users"`
	}
	if err := yaml.UnmarshalStrict([]byte(web), &conf); err != nil {
		t.Fatalf("web.yml: %v\n%s", err, web)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(conf.Users[user]), []byte(pass)); err != nil {
		t.Errorf("web.yml's hash for %s does not match the password: %v\n%s", user, err, web)
	}
	c := r.ds.Spec.Template.Spec.Containers[0]
	if !strings.Contains(strings.Join(c.Args, " "), "--web.config.file=/etc/gpufeed/web.yml") {
		t.Errorf("args %v lack the web configuration", c.Args)
	}
	mounted := false
	for _, v := range r.ds.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == r.sec.Name {
			for _, m := range c.VolumeMounts {
				mounted = mounted || m.Name == v.Name && m.MountPath == "/etc/gpufeed"
			}
		}
	}
	if !mounted {
		t.Errorf("the Secret %s is not mounted at /etc/gpufeed", r.sec.Name)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet != nil || p.TCPSocket == nil {
		t.Errorf("readiness probe %+v: an HTTP probe would be refused without the password", p)
	}
	ba := r.sm.Spec.Endpoints[0].BasicAuth
	if ba == nil || ba.Username.Name != r.sec.Name || ba.Username.Key != "username" || ba.Password.Name != r.sec.Name || ba.Password.Key != "password" {
		t.Errorf("ServiceMonitor basic auth %+v, want the Secret's username and password", ba)
	}
}

// TestHelmChartServiceMonitor: the ServiceMonitor is rendered where the
// cluster serves its CRD (helm install fails on a kind the API server does
// not know) or when asked, never when refused; it carries the labels a
// Prometheus selects on.
func TestHelmChartServiceMonitor(t *testing.T) {
	sm := func(enabled any, caps *chartutil.Capabilities) *monitoringv1.ServiceMonitor {
		t.Helper()
		vals := map[string]any{}
		if enabled != nil {
			vals["serviceMonitor"] = map[string]any{"enabled": enabled}
		}
		r, err := renderOn(t, vals, caps)
		if err != nil {
			t.Fatalf("serviceMonitor.enabled=%v: %v", enabled, err)
		}
		return r.sm
	}
	if sm(nil, chartutil.DefaultCapabilities) != nil {
		t.Error("the default values render a ServiceMonitor on a cluster without the Prometheus Operator's CRD")
	}
	if sm(nil, withOperator) == nil {
		t.Error("the default values render no ServiceMonitor on a cluster with the Prometheus Operator")
	}
	if sm(true, chartutil.DefaultCapabilities) == nil || sm("true", chartutil.DefaultCapabilities) == nil {
		t.Error("serviceMonitor.enabled=true renders no ServiceMonitor")
	}
	if sm(false, withOperator) != nil {
		t.Error("serviceMonitor.enabled=false renders a ServiceMonitor")
	}
	if _, err := render(t, map[string]any{"serviceMonitor": map[string]any{"enabled": "yes"}}); err == nil || !strings.Contains(err.Error(), "want auto, true or false") {
		t.Errorf("serviceMonitor.enabled=yes: %v, want a render error saying what it takes", err)
	}
	r, err := renderOn(t, map[string]any{"serviceMonitor": map[string]any{"labels": map[string]any{"release": "kube-prometheus-stack"}},
		"commonLabels": map[string]any{"team": "ml-platform"}}, withOperator)
	if err != nil {
		t.Fatal(err)
	}
	if r.sm.Labels["release"] != "kube-prometheus-stack" || r.sm.Labels["team"] != "ml-platform" {
		t.Errorf("ServiceMonitor labels %v: want release=kube-prometheus-stack and the common team=ml-platform", r.sm.Labels)
	}
	for what, labels := range map[string]map[string]string{"DaemonSet": r.ds.Labels, "Service": r.svc.Labels, "NetworkPolicy": r.np.Labels} {
		if labels["team"] != "ml-platform" || labels["release"] != "" {
			t.Errorf("%s labels %v: want the common label only", what, labels)
		}
	}
	checkService(t, r.ds, r.svc, r.sm)
}

// TestHelmChartNamespaceAndSecurity: namespace puts every object there;
// securityContext and resources are the values'; the default image is the
// one make image builds.
func TestHelmChartNamespaceAndSecurity(t *testing.T) {
	r, err := renderOn(t, nil, withOperator)
	if err != nil {
		t.Fatal(err)
	}
	if img := r.ds.Spec.Template.Spec.Containers[0].Image; img != madeImage(t) {
		t.Errorf("default image %s, want %s: the image make image builds", img, madeImage(t))
	}
	r, err = renderOn(t, map[string]any{"namespace": "monitoring-agents", "detailAuth": map[string]any{"enabled": true},
		"resources":       map[string]any{"limits": map[string]any{"memory": "200Mi"}},
		"securityContext": map[string]any{"runAsUser": 0, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": map[string]any{"drop": []any{"ALL"}, "add": []any{"SYS_PTRACE"}}},
	}, withOperator)
	if err != nil {
		t.Fatal(err)
	}
	for what, ns := range map[string]string{"DaemonSet": r.ds.Namespace, "Service": r.svc.Namespace, "ServiceMonitor": r.sm.Namespace,
		"NetworkPolicy": r.np.Namespace, "Secret": r.sec.Namespace} {
		if ns != "monitoring-agents" {
			t.Errorf("%s in namespace %q, want monitoring-agents", what, ns)
		}
	}
	checkDaemonSet(t, r.ds)
	c := r.ds.Spec.Template.Spec.Containers[0]
	if add := c.SecurityContext.Capabilities.Add; len(add) != 1 || add[0] != "SYS_PTRACE" {
		t.Errorf("capabilities %v, want the values' SYS_PTRACE only", add)
	}
	if m := c.Resources.Limits.Memory().String(); m != "200Mi" {
		t.Errorf("memory limit %s, want 200Mi", m)
	}
}

// decodeDocs decodes each YAML document of text strictly into its API type.
func decodeDocs(t *testing.T, name, text string, r *rendered) {
	t.Helper()
	for _, doc := range strings.Split(text, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch meta.Kind {
		case "":
			continue // comments only
		case "DaemonSet":
			r.ds = &appsv1.DaemonSet{}
			decodeBytes(t, name, []byte(doc), r.ds)
		case "Service":
			r.svc = &corev1.Service{}
			decodeBytes(t, name, []byte(doc), r.svc)
		case "ServiceMonitor":
			r.sm = &monitoringv1.ServiceMonitor{}
			decodeBytes(t, name, []byte(doc), r.sm)
		case "NetworkPolicy":
			r.np = &networkingv1.NetworkPolicy{}
			decodeBytes(t, name, []byte(doc), r.np)
		case "Secret":
			r.sec = &corev1.Secret{}
			decodeBytes(t, name, []byte(doc), r.sec)
		default:
			t.Errorf("%s: kind %q is not validated by this test", name, meta.Kind)
		}
	}
}

// TestHelmCLI: helm lint --strict passes, and helm template (as a user
// runs it, without a cluster) renders what the engine renders: no
// ServiceMonitor unless the API versions hold the Prometheus Operator's, or
// it is asked for. make test installs helm (go install at the version this
// module renders with); without it the test skips unless
// GPUFEED_REQUIRE_HELM is set.
func TestHelmCLI(t *testing.T) {
	helm, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("GPUFEED_REQUIRE_HELM") != "" {
			t.Fatal("helm is not in PATH and GPUFEED_REQUIRE_HELM is set")
		}
		t.Skip("helm is not installed (make test installs it: go install helm.sh/helm/v3/cmd/helm@v3.22.0)")
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(helm, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("lint", "--strict", chartDir)
	run("lint", "--strict", chartDir, "--set", "detailAuth.enabled=true,serviceMonitor.enabled=true,criRecords=crio")
	for _, c := range []struct {
		args []string
		sm   bool
	}{
		{nil, false},
		{[]string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"}, true},
		{[]string{"--set", "serviceMonitor.enabled=true"}, true},
		{[]string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--set", "serviceMonitor.enabled=false"}, false},
	} {
		var r rendered
		decodeDocs(t, "helm template", run(append([]string{"template", "gpufeed", chartDir, "-n", "gpufeed",
			"--set", "serviceMonitor.labels.release=kube-prometheus-stack"}, c.args...)...), &r)
		if r.ds == nil || r.svc == nil || r.np == nil {
			t.Fatalf("helm template %v: want a DaemonSet, a Service and a NetworkPolicy", c.args)
		}
		checkDaemonSet(t, r.ds)
		if (r.sm != nil) != c.sm {
			t.Errorf("helm template %v: ServiceMonitor rendered %v, want %v", c.args, r.sm != nil, c.sm)
		}
		if r.sm != nil {
			checkService(t, r.ds, r.svc, r.sm)
			if r.sm.Labels["release"] != "kube-prometheus-stack" {
				t.Errorf("helm template %v: ServiceMonitor labels %v lack release", c.args, r.sm.Labels)
			}
		}
	}
}
