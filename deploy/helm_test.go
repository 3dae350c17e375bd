package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/runnerflow/runnerflow/deploy"
)

// chartDir is the Helm chart, relative to this package.
const chartDir = "helm/runnerflow"

// rendered is a chart rendered as `helm template` renders it: the release's objects in Helm's
// install order, and its hooks in the order Helm runs them (by weight, then name).
type rendered struct {
	objects []*unstructured.Unstructured
	hooks   []renderedHook
}

type renderedHook struct {
	obj    *unstructured.Unstructured
	events []release.HookEvent
	weight int
}

// renderChart renders the chart with the Helm SDK's own steps of `helm template --namespace ns
// release chart -f values`: load, coalesce the values with the chart's (and check them against
// a schema, if the chart has one), render the templates, drop NOTES.txt, split hooks from
// objects and sort both. valuesYAML overrides the chart's values.yaml.
func renderChart(release, ns, valuesYAML string) (rendered, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return rendered{}, err
	}
	vals, err := chartutil.ReadValues([]byte(valuesYAML))
	if err != nil {
		return rendered{}, fmt.Errorf("values: %w", err)
	}
	caps, err := capabilities()
	if err != nil {
		return rendered{}, err
	}
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return rendered{}, fmt.Errorf("chart needs kubeVersion %s; rendering for %s", ch.Metadata.KubeVersion, caps.KubeVersion)
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: release, Namespace: ns, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return rendered{}, err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return rendered{}, err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return rendered{}, err
	}
	var out rendered
	for _, m := range manifests {
		objs, err := decode([]byte(m.Content))
		if err != nil {
			return rendered{}, fmt.Errorf("%s: %w", m.Name, err)
		}
		out.objects = append(out.objects, objs...)
	}
	// Helm runs the hooks of one event by weight, then by name (action.execHook).
	sort.SliceStable(hooks, func(i, j int) bool {
		if hooks[i].Weight != hooks[j].Weight {
			return hooks[i].Weight < hooks[j].Weight
		}
		return hooks[i].Name < hooks[j].Name
	})
	for _, h := range hooks {
		objs, err := decode([]byte(h.Manifest))
		if err != nil || len(objs) != 1 {
			return rendered{}, fmt.Errorf("hook %s: %d objects, %v", h.Path, len(objs), err)
		}
		out.hooks = append(out.hooks, renderedHook{obj: objs[0], events: h.Events, weight: h.Weight})
	}
	return out, nil
}

// capabilities are the SDK's defaults with the Kubernetes version of this module's client-go
// (v0.34.x → v1.34.x), which is how the helm binary is built: `helm template` renders for it.
func capabilities() (*chartutil.Capabilities, error) {
	capsOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go").Output()
		if err != nil {
			capsErr = fmt.Errorf("go list -m k8s.io/client-go: %w", err)
			return
		}
		minor, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "v0.")
		if !ok {
			capsErr = fmt.Errorf("k8s.io/client-go %s is not a v0.x version", out)
			return
		}
		v := "v1." + minor
		c := *chartutil.DefaultCapabilities
		c.KubeVersion = chartutil.KubeVersion{Version: v, Major: "1", Minor: strings.Split(minor, ".")[0]}
		caps = &c
	})
	return caps, capsErr
}

var (
	capsOnce sync.Once
	caps     *chartutil.Capabilities
	capsErr  error
)

func mustRenderChart(t *testing.T, release, ns, valuesYAML string) rendered {
	t.Helper()
	r, err := renderChart(release, ns, valuesYAML)
	if err != nil {
		t.Fatalf("render the chart (release %s, namespace %s): %v", release, ns, err)
	}
	return r
}

// all is every object the release creates: its objects, then its hooks.
func (r rendered) all() []*unstructured.Unstructured {
	out := slices.Clone(r.objects)
	for _, h := range r.hooks {
		out = append(out, h.obj)
	}
	return out
}

// fullValues turns on every option that changes what the chart renders.
const fullValues = `
temporal:
  address: my-ns.a1b2c.tmprl.cloud:7233
  namespace: my-ns.a1b2c
  tls: {enabled: true, serverName: my-ns.a1b2c.tmprl.cloud, clientCertSecret: temporal-client, caSecret: temporal-ca}
  apiKeySecret: {name: temporal-cloud, key: key}
github: {auth: token, existingSecret: gh, url: "https://ghe.example.com/api/v3/", pointsPerMinute: 600}
webhook: {existingSecret: hook, key: hmac}
metrics: {port: 9100}
worker:
  replicas: 3
  kubeQPS: 80
  kubeBurst: 160
  logLevel: debug
  extraArgs: ["--kubeconfig="]
  podAnnotations: {example.com/team: ci}
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
starter:
  port: 8081
  extraArgs: ["--scale-window=5s"]
webhookService: {type: NodePort, port: 8080}
imagePullSecrets: [{name: registry}]
serviceMonitor: {enabled: true, interval: 15s, labels: {release: prometheus}}
pools:
  - name: linux
    organization: my-org
    labels: [self-hosted, linux]
    maxReplicas: 5
    template:
      spec:
        containers:
          - name: runner
            image: ghcr.io/actions/actions-runner:2.328.0
            command: ["/home/runner/run.sh"]
`

// helmLabels are the labels Helm charts add and a kustomize base has no use for.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// withoutHelmLabels returns obj as plain JSON data without helmLabels anywhere (labels and
// selectors alike).
func withoutHelmLabels(t *testing.T, obj *unstructured.Unstructured) any {
	t.Helper()
	data, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, l := range helmLabels {
				delete(v, l)
			}
			for k, e := range v {
				if m, ok := e.(map[string]any); ok && len(m) == 0 && (k == "labels" || k == "matchLabels" || k == "selector") {
					delete(v, k)
					continue
				}
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	strip(v)
	return v
}

// diff lists the paths where a and b differ.
func diff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			out = append(out, diff(path+"."+k, am[k], bm[k])...)
		}
		return out
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		var out []string
		for i := range as {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return []string{fmt.Sprintf("%s: %s vs %s", path, ja, jb)}
}

// With its default values and a release named runnerflow in namespace runnerflow, the chart
// renders the kustomize base object for object and field for field, but for the labels that
// tie objects to a Helm release (also in selectors, so two releases never select each other's
// pods) and the Namespace, which Helm leaves to `--create-namespace`. Whatever one of them
// changes, the other must follow: this is what keeps them from drifting.
func TestChartRendersTheKustomizeBase(t *testing.T) {
	chart := mustRenderChart(t, "runnerflow", deploy.Namespace, "")
	base := map[string]*unstructured.Unstructured{}
	for _, o := range renderBase(t) {
		if o.GetKind() != "Namespace" || o.GetName() != deploy.Namespace { // the chart creates the warm one
			base[o.GetKind()+"/"+o.GetName()] = o
		}
	}
	got := map[string]*unstructured.Unstructured{}
	for _, o := range chart.objects {
		got[o.GetKind()+"/"+o.GetName()] = o
	}
	if k1, k2 := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(base)); !slices.Equal(k1, k2) {
		t.Fatalf("the chart renders\n  %v\nthe base\n  %v", k1, k2)
	}
	for key, b := range base {
		if d := diff(key, withoutHelmLabels(t, got[key]), withoutHelmLabels(t, b)); len(d) > 0 {
			t.Errorf("chart vs base:\n  %s", strings.Join(d, "\n  "))
		}
		for _, l := range []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
			if _, ok := got[key].GetLabels()[l]; !ok {
				t.Errorf("%s lacks Helm's label %s", key, l)
			}
		}
	}
	// The comparison is not blind to the labels it strips: selectors carry the release.
	for _, name := range []string{"runnerflow-worker", "runnerflow-starter"} {
		sel, _, _ := unstructured.NestedStringMap(got["Deployment/"+name].Object, "spec", "selector", "matchLabels")
		if sel["app.kubernetes.io/instance"] != "runnerflow" {
			t.Errorf("Deployment %s selects %v; want the release's instance label too", name, sel)
		}
	}
	// The defaults' only hook registers the search attributes; there are no pools to apply.
	if len(chart.hooks) != 1 || chart.hooks[0].obj.GetName() != "runnerflow-search-attributes" {
		t.Errorf("default hooks %v, want the search-attribute Job only", hookNames(chart))
	}
}

func hookNames(r rendered) []string {
	var out []string
	for _, h := range r.hooks {
		out = append(out, h.obj.GetKind()+"/"+h.obj.GetName())
	}
	return out
}

// The drift check above fails when the chart's Role and the base's differ (it is not satisfied
// by comparing a thing with itself).
func TestChartDriftIsDetected(t *testing.T) {
	chart := mustRenderChart(t, "runnerflow", deploy.Namespace, "")
	var chartRole, baseRole *unstructured.Unstructured
	for _, o := range chart.objects {
		if o.GetKind() == "Role" && o.GetName() == deploy.WorkerServiceAccount {
			chartRole = o.DeepCopy()
		}
	}
	for _, o := range renderBase(t) {
		if o.GetKind() == "Role" && o.GetName() == deploy.WorkerServiceAccount {
			baseRole = o
		}
	}
	if d := diff("Role", withoutHelmLabels(t, chartRole), withoutHelmLabels(t, baseRole)); len(d) > 0 {
		t.Fatalf("the Roles differ already: %v", d)
	}
	rules, _, _ := unstructured.NestedSlice(chartRole.Object, "rules")
	verbs, _, _ := unstructured.NestedStringSlice(rules[0].(map[string]any), "verbs")
	_ = unstructured.SetNestedStringSlice(rules[0].(map[string]any), append(verbs, "patch"), "verbs")
	_ = unstructured.SetNestedSlice(chartRole.Object, rules, "rules")
	if d := diff("Role", withoutHelmLabels(t, chartRole), withoutHelmLabels(t, baseRole)); len(d) != 1 {
		t.Errorf("a verb added to the chart's Role: diff %v, want one difference", d)
	}
}

var (
	serviceMonitorCRD    sync.Once
	serviceMonitorCRDErr error
)

// applyChart renders the chart for release into ns and applies it to the package's API
// server as `helm install` would: the release's objects, then its hooks. The ServiceMonitor
// CRD is installed first (a stand-in, see serviceMonitorCRDYAML).
func applyChart(t *testing.T, release, ns, valuesYAML string) (rendered, []*unstructured.Unstructured) {
	t.Helper()
	k := startKube(t)
	r := mustRenderChart(t, release, ns, valuesYAML)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	serviceMonitorCRD.Do(func() { serviceMonitorCRDErr = installServiceMonitorCRD(ctx, k.Config) })
	if serviceMonitorCRDErr != nil {
		t.Fatalf("install the ServiceMonitor CRD: %v", serviceMonitorCRDErr)
	}
	// A new Applier after the CRD is served: an Applier's discovery cache is filled once.
	a, err := deploy.NewApplier(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	applied, err := a.Apply(ctx, r.all(), deploy.ApplyOptions{})
	if err != nil {
		t.Fatalf("apply the chart's objects: %v", err)
	}
	return r, applied
}

// The chart's objects and hooks are accepted by the real API server (server-side apply with
// strict field validation, for real: nothing runs them here) with the default values and with
// every option on, and a second apply of the same objects changes nothing.
func TestChartAppliesToTheAPIServer(t *testing.T) {
	k := startKube(t)
	dc, err := discovery.NewDiscoveryClientForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, v.GitVersion) {
		t.Errorf("the chart's kubeVersion %s excludes the test's API server %s", ch.Metadata.KubeVersion, v.GitVersion)
	}
	for name, values := range map[string]string{"defaults": "", "every option": fullValues} {
		t.Run(name, func(t *testing.T) {
			ns := k.NewNamespace(t)
			r, applied := applyChart(t, "ci", ns, values)
			if len(applied) != len(r.all()) {
				t.Fatalf("applied %d of %d objects", len(applied), len(r.all()))
			}
			a, err := deploy.NewApplier(k.Config)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			again, err := a.Apply(ctx, r.all(), deploy.ApplyOptions{})
			if err != nil {
				t.Fatalf("second apply: %v", err)
			}
			for i, o := range again {
				if o.GetResourceVersion() != applied[i].GetResourceVersion() {
					t.Errorf("%s %s changed on a second apply", o.GetKind(), o.GetName())
				}
				want := ns
				switch {
				case o.GetKind() == "Namespace":
					want = "" // the warm namespace, cluster-scoped
				case strings.HasSuffix(o.GetName(), "-worker-warm"):
					want = ns + "-warm"
				}
				if o.GetNamespace() != want {
					t.Errorf("%s %s went to namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), want)
				}
			}
		})
	}
}

// serviceMonitorCRDYAML stands in for the Prometheus Operator's ServiceMonitor CRD: the same
// group, kind and scope, and a schema of only the fields the chart sets (their names and the
// Operator's duration pattern as its CRD has them). Anything else the chart might set is an
// unknown field, which the API server's strict validation refuses.
const serviceMonitorCRDYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          required: [spec]
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              required: [endpoints, selector]
              properties:
                endpoints:
                  type: array
                  items:
                    type: object
                    properties:
                      port: {type: string}
                      path: {type: string}
                      interval:
                        type: string
                        pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'
                namespaceSelector:
                  type: object
                  properties:
                    any: {type: boolean}
                    matchNames: {type: array, items: {type: string}}
                selector:
                  type: object
                  properties:
                    matchLabels: {type: object, additionalProperties: {type: string}}
`

// installServiceMonitorCRD applies the stand-in CRD and waits until the API server serves it.
func installServiceMonitorCRD(ctx context.Context, cfg *rest.Config) error {
	objs, err := decode([]byte(serviceMonitorCRDYAML))
	if err != nil {
		return err
	}
	a, err := deploy.NewApplier(cfg)
	if err != nil {
		return err
	}
	if _, err := a.Apply(ctx, objs, deploy.ApplyOptions{}); err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	for {
		list, err := dc.ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		if err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "servicemonitors" }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("servicemonitors not served: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
