package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/runnerflow/runnerflow/deploy"
	"github.com/runnerflow/runnerflow/internal/poolspec"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// chartCases are the value sets the flag and security checks run on.
var chartCases = map[string]string{"defaults": "", "every option": fullValues}

// Every flag and environment variable the chart gives the worker, the starter and the pools Job
// exists in the built binaries, the ports the containers declare are the ones the binaries
// listen on, and the search-attribute Job's flags are the temporal CLI's own.
func TestChartUsesOnlyRealFlagsAndEnvironment(t *testing.T) {
	for name, values := range chartCases {
		t.Run(name, func(t *testing.T) {
			r := mustRenderChart(t, "ci", "ci-ns", values)
			objs := r.all()
			for _, bin := range []string{"worker", "starter"} {
				var d appsv1.Deployment
				typed(t, objs, "Deployment", "ci-runnerflow-"+bin, &d)
				c := d.Spec.Template.Spec.Containers[0]
				checkInvocation(t, bin, c.Args, envNames(c))
				if p := containerPort(c, "metrics"); p != listenPort(t, bin, c.Args, "metrics") {
					t.Errorf("%s: container metrics port %s, the binary listens on %s", bin, p, listenPort(t, bin, c.Args, "metrics"))
				}
				if bin == "starter" && containerPort(c, "webhook") != listenPort(t, bin, c.Args, "webhook") {
					t.Errorf("starter: container webhook port %s, the binary listens on %s", containerPort(c, "webhook"), listenPort(t, bin, c.Args, "webhook"))
				}
			}
			if values != "" {
				var job batchv1.Job
				typed(t, objs, "Job", "ci-runnerflow-pools", &job)
				c := job.Spec.Template.Spec.Containers[0]
				checkInvocation(t, "starter", c.Args, envNames(c))
			}
			var job batchv1.Job
			typed(t, objs, "Job", "ci-runnerflow-search-attributes", &job)
			cli := temporalCLIFlags(t)
			envconfig := envVarsRead(t, packageDir(t, "go.temporal.io/sdk/contrib/envconfig"))
			for _, c := range append(job.Spec.Template.Spec.InitContainers, job.Spec.Template.Spec.Containers...) {
				for _, a := range c.Args {
					if f, ok := strings.CutPrefix(a, "--"); ok && !cli[strings.SplitN(f, "=", 2)[0]] {
						t.Errorf("search-attribute Job, container %s: %s is not a flag of `temporal operator search-attribute`", c.Name, a)
					}
				}
				for _, e := range envNames(c) {
					if !envconfig[e] {
						t.Errorf("search-attribute Job, container %s: the temporal CLI's settings library never reads %s", c.Name, e)
					}
				}
			}
		})
	}
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

// temporalCLIFlags are the flags `temporal operator search-attribute create -h` lists (cobra's
// help: "  -n, --namespace string  ..."), the command's own and the global ones.
func temporalCLIFlags(t *testing.T) map[string]bool {
	t.Helper()
	cli, err := testworld.ToolPath("temporal")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cli, "operator", "search-attribute", "create", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("temporal -h: %v\n%s", err, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][-a-z0-9]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["address"] || !flags["name"] || !flags["type"] {
		t.Fatalf("could not read the CLI's flags from:\n%s", out)
	}
	return flags
}

// The search-attribute Job registers exactly the workflows' search attributes: its containers,
// run in order with the real temporal CLI against a Temporal server that has none, leave the
// server with every one of them and its type, and running them again (an upgrade) succeeds.
func TestChartRegistersTheSearchAttributesWithTheTemporalCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := testworld.StartTemporal(ctx, testworld.TemporalOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start Temporal: %v", err)
	}
	defer srv.Stop()
	r := mustRenderChart(t, "runnerflow", deploy.Namespace, "temporal: {address: "+srv.Address+", namespace: "+srv.Namespace+"}")
	var job batchv1.Job
	typed(t, r.all(), "Job", "runnerflow-search-attributes", &job)
	pod := job.Spec.Template.Spec
	steps := append(slices.Clone(pod.InitContainers), pod.Containers...)
	registered := map[string]string{}
	for _, c := range pod.InitContainers {
		typ := ""
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--type="); ok {
				typ = v
			}
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--name="); ok {
				registered[v] = typ
			}
		}
	}
	want := workflows.SearchAttributeTypes()
	if !maps.Equal(registered, want) {
		t.Errorf("the Job registers %v, the workflows use %v", registered, want)
	}
	for round := range 2 {
		for _, c := range steps {
			cmd := exec.CommandContext(ctx, srv.CLIPath, c.Args...)
			cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("round %d, container %s: temporal %s: %v\n%s", round+1, c.Name, strings.Join(c.Args, " "), err, out)
			}
		}
	}
	out, err := exec.CommandContext(ctx, srv.CLIPath, "operator", "search-attribute", "list", "--address="+srv.Address,
		"--namespace="+srv.Namespace, "--output=json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		CustomAttributes map[string]string `json:"customAttributes"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for name, typ := range want {
		upper := strings.ToUpper(regexp.MustCompile(`([a-z])([A-Z])`).ReplaceAllString(typ, "${1}_${2}"))
		if got := list.CustomAttributes[name]; got != "INDEXED_VALUE_TYPE_"+upper {
			t.Errorf("after the Job, %s is %q on the server, want type %s", name, got, typ)
		}
	}
}

// The pools file the chart writes into its ConfigMap is the pools of the values, each in the
// release's namespace: the example pools given as values come out as the example file parses,
// the real `starter apply --dry-run` accepts the file, and the Job that applies it runs after
// the search attributes are registered, on every install and upgrade.
func TestChartAppliesThePoolsAfterTheSearchAttributes(t *testing.T) {
	data, err := os.ReadFile("examples/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pools []any
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		var p map[string]any
		if err == nil {
			err = yaml.Unmarshal(doc, &p)
		}
		if err != nil {
			t.Fatal(err)
		}
		if p != nil {
			delete(p, "namespace") // the chart fills in the release's
			pools = append(pools, p)
		}
	}
	values, err := yaml.Marshal(map[string]any{"pools": pools})
	if err != nil {
		t.Fatal(err)
	}
	chart := mustRenderChart(t, "runnerflow", deploy.Namespace, string(values))
	var cm corev1.ConfigMap
	typed(t, chart.objects, "ConfigMap", "runnerflow-pools", &cm)
	got, err := poolspec.Parse([]byte(cm.Data["pools.yaml"]))
	if err != nil {
		t.Fatalf("the chart's pools file: %v", err)
	}
	want, err := poolspec.ReadFile("examples/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the chart's pools file parses to\n  %+v\nthe example file to\n  %+v", got, want)
	}
	// The Job's own command line, with the file where the ConfigMap is mounted, through the
	// real starter binary (dry run: validate and print, start nothing).
	var job batchv1.Job
	typed(t, chart.all(), "Job", "runnerflow-pools", &job)
	c := job.Spec.Template.Spec.Containers[0]
	file := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["pools.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	mount := ""
	for _, m := range c.VolumeMounts {
		if m.Name == "pools" {
			mount = m.MountPath
		}
	}
	args := slices.Clone(c.Args)
	for i, a := range args {
		if strings.HasPrefix(a, "-f="+mount+"/") {
			args[i] = "-f=" + file
		}
	}
	if slices.Equal(args, c.Args) {
		t.Fatalf("the pools Job does not read a file from its pools mount %q: %v", mount, c.Args)
	}
	binary(t, "starter", "apply")
	out, err := exec.Command(filepath.Join(binDir, "starter"), append(args, "--dry-run")...).CombinedOutput()
	if err != nil {
		t.Fatalf("starter %s --dry-run: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, p := range want {
		if !strings.Contains(string(out), p.Name) {
			t.Errorf("starter apply --dry-run does not show pool %s:\n%s", p.Name, out)
		}
	}
	checkHookOrder(t, chart)
}

// checkHookOrder: both Jobs run after install and after upgrade, the search attributes first.
func checkHookOrder(t *testing.T, r rendered) {
	t.Helper()
	var order []string
	for _, h := range r.hooks {
		order = append(order, h.obj.GetName())
		if !slices.Contains(h.events, "post-install") || !slices.Contains(h.events, "post-upgrade") {
			t.Errorf("hook %s runs on %v, want post-install and post-upgrade", h.obj.GetName(), h.events)
		}
	}
	if !slices.Equal(order, []string{"runnerflow-search-attributes", "runnerflow-pools"}) {
		t.Errorf("hooks run in the order %v, want the search attributes, then the pools", order)
	}
}

// What the chart must refuse to render, with a message that names the problem.
func TestChartRefusesBadValues(t *testing.T) {
	for values, want := range map[string]string{
		"github: {auth: oauth}":                    `github.auth is "oauth"`,
		"pools: [{name: a, namespace: elsewhere}]": "pool a puts its runners in namespace elsewhere",
		"pools: [{organization: my-org}]":          "pools[0] has no name",
		"temporal: {address: ''}":                  "temporal.address is required",
	} {
		if _, err := renderChart("runnerflow", deploy.Namespace, values); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("values %q: error %v, want one saying %q", values, err, want)
		}
	}
}

// Every pod the chart makes, Jobs included, runs as the base's do: non-root, read-only root
// filesystem, no privilege escalation, no capabilities, resources set; the Deployments also
// have their probes on /healthz and /readyz. Only the worker mounts a ServiceAccount token.
func TestChartWorkloadsRunLockedDown(t *testing.T) {
	for name, values := range chartCases {
		t.Run(name, func(t *testing.T) {
			for _, o := range mustRenderChart(t, "ci", "ci-ns", values).all() {
				var pod corev1.PodSpec
				switch o.GetKind() {
				case "Deployment":
					var d appsv1.Deployment
					toTyped(t, o, &d)
					pod = d.Spec.Template.Spec
					checkContainer(t, pod.Containers[0])
				case "Job":
					var j batchv1.Job
					toTyped(t, o, &j)
					pod = j.Spec.Template.Spec
					for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
						checkJobContainer(t, o.GetName(), c)
					}
				default:
					continue
				}
				checkPodSecurity(t, pod)
				token := pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken
				if wantToken := o.GetName() == "ci-runnerflow-worker"; token != wantToken {
					t.Errorf("%s %s mounts a ServiceAccount token: %v, want %v", o.GetKind(), o.GetName(), token, wantToken)
				}
			}
		})
	}
}

func toTyped(t *testing.T, o *unstructured.Unstructured, out any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

func checkJobContainer(t *testing.T, job string, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("Job %s, container %s: want a read-only root filesystem, no privilege escalation, all capabilities dropped; got %+v", job, c.Name, sc)
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Errorf("Job %s, container %s: no memory limit", job, c.Name)
	}
}

// The chart creates no Secret and reads only the ones its values name: the GitHub App's three
// keys or the token, the webhook secret, and the Temporal client certificate, CA and API key.
func TestChartReadsOnlyTheSecretsItIsGiven(t *testing.T) {
	for name, tc := range map[string]struct {
		values string
		want   []string
	}{
		"defaults": {"", []string{
			"runnerflow-github/app-id", "runnerflow-github/installation-id", "runnerflow-github/private-key.pem", "runnerflow-webhook/"}},
		"every option": {fullValues, []string{
			"gh/token", "hook/", "temporal-ca/ca.crt", "temporal-client/tls.crt", "temporal-client/tls.key", "temporal-cloud/key"}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := mustRenderChart(t, "runnerflow", deploy.Namespace, tc.values).all()
			got := map[string]bool{}
			for _, o := range objs {
				if o.GetKind() == "Secret" {
					t.Errorf("the chart creates Secret %s; it must only reference existing ones", o.GetName())
				}
				for _, ref := range podSecretRefs(t, o) {
					got[ref] = true
				}
			}
			if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, tc.want) {
				t.Errorf("the chart's pods read Secrets %v, want %v", keys, tc.want)
			}
		})
	}
}

// podSecretRefs lists "secret/key" ("secret/" for a whole-Secret volume) for the pods of a
// Deployment or Job.
func podSecretRefs(t *testing.T, o *unstructured.Unstructured) []string {
	t.Helper()
	var pod corev1.PodSpec
	switch o.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		toTyped(t, o, &d)
		pod = d.Spec.Template.Spec
	case "Job":
		var j batchv1.Job
		toTyped(t, o, &j)
		pod = j.Spec.Template.Spec
	default:
		return nil
	}
	var out []string
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		if len(v.Secret.Items) == 0 {
			out = append(out, v.Secret.SecretName+"/")
		}
		for _, item := range v.Secret.Items {
			out = append(out, v.Secret.SecretName+"/"+item.Key)
		}
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name+"/"+e.ValueFrom.SecretKeyRef.Key)
			}
		}
	}
	return out
}

// The ServiceMonitor scrapes the metrics Service: it selects that Service's labels, in the
// release's namespace, on the Service's port name.
func TestChartServiceMonitorScrapesTheMetricsService(t *testing.T) {
	objs := mustRenderChart(t, "ci", "ci-ns", fullValues).all()
	var sm, svc *unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "ServiceMonitor":
			sm = o
		case o.GetKind() == "Service" && o.GetName() == "ci-runnerflow-metrics":
			svc = o
		}
	}
	if sm == nil || svc == nil {
		t.Fatalf("ServiceMonitor %v, metrics Service %v", sm != nil, svc != nil)
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the metrics Service does not carry (%v)", k, v, svc.GetLabels())
		}
	}
	if len(sel) == 0 {
		t.Error("the ServiceMonitor selects every Service")
	}
	names, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	if !slices.Equal(names, []string{"ci-ns"}) {
		t.Errorf("the ServiceMonitor looks in namespaces %v, want the release's", names)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if len(endpoints) != 1 || len(ports) != 1 || endpoints[0].(map[string]any)["port"] != ports[0].(map[string]any)["name"] {
		t.Errorf("ServiceMonitor endpoints %v, metrics Service ports %v: want one endpoint on the Service's port", endpoints, ports)
	}
	if got := sm.GetLabels()["release"]; got != "prometheus" {
		t.Errorf("the ServiceMonitor lacks the label Prometheus selects it by (release=%q)", got)
	}
}
