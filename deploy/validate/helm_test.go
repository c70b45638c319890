package validate

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"golang.org/x/crypto/bcrypt"
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
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	if err := ch.Validate(); err != nil {
		t.Fatalf("the chart: %v", err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "gpufeed", Namespace: "gpufeed", IsInstall: true, Revision: 1},
		chartutil.DefaultCapabilities)
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
		if strings.HasSuffix(name, ".tpl") || strings.TrimSpace(files[name]) == "" {
			continue
		}
		for _, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var meta struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			switch meta.Kind {
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
	return r, nil
}

// TestHelmChartRendersThePlainManifests: with its default values the chart
// renders the objects of deploy/kubernetes, spec for spec; its labels are
// theirs plus Helm's own.
func TestHelmChartRendersThePlainManifests(t *testing.T) {
	r, err := render(t, nil)
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
	decode(t, "servicemonitor.yaml", &sm)
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
	r, err := render(t, map[string]any{"detailAuth": map[string]any{"enabled": true}, "networkPolicy": map[string]any{"enabled": false}})
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
