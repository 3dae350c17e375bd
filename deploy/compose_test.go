package deploy_test

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/runnerflow/runnerflow/workflows"
)

// composeFile is the part of the Compose specification the checks read.
type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image       string         `json:"image"`
	Build       *composeBuild  `json:"build"`
	Command     []string       `json:"command"`
	Entrypoint  []string       `json:"entrypoint"`
	Environment map[string]any `json:"environment"`
	Ports       []string       `json:"ports"`
	Volumes     []string       `json:"volumes"`
	DependsOn   any            `json:"depends_on"`
}

type composeBuild struct {
	Context    string            `json:"context"`
	Dockerfile string            `json:"dockerfile"`
	Args       map[string]string `json:"args"`
}

// readCompose parses docker-compose.yaml. It is held to the list and mapping forms this file
// uses (command as a list, environment as a mapping, ports as strings): a decoding error here
// means the file changed form and the checks below need to follow.
func readCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("../docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	return c
}

func TestComposeHasTheServices(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"postgresql", "temporal-schema", "temporal", "temporal-setup", "temporal-ui", "worker", "starter", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("no service %q", name)
		}
	}
	for name, s := range c.Services {
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s has neither image nor build", name)
		}
		if s.Build == nil && (!strings.Contains(s.Image, ":") || strings.HasSuffix(s.Image, ":latest")) {
			t.Errorf("service %s: image %q is not pinned to a version", name, s.Image)
		}
		for _, dep := range dependencies(t, s.DependsOn) {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("service %s depends on %q, which is not a service", name, dep)
			}
		}
	}
}

// dependencies reads depends_on in either of its forms: a list of names or a mapping from name
// to condition.
func dependencies(t *testing.T, v any) []string {
	t.Helper()
	switch d := v.(type) {
	case nil:
		return nil
	case []any:
		var out []string
		for _, s := range d {
			out = append(out, s.(string))
		}
		return out
	case map[string]any:
		return slices.Sorted(maps.Keys(d))
	}
	t.Fatalf("depends_on of unexpected form %T", v)
	return nil
}

func TestComposePublishedPortsDoNotClash(t *testing.T) {
	c := readCompose(t)
	owner := map[string]string{}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			host, _ := publishedPort(t, p)
			if other, ok := owner[host]; ok {
				t.Errorf("host port %s is published by both %s and %s", host, other, name)
			}
			owner[host] = name
		}
	}
	if len(owner) == 0 {
		t.Error("no service publishes a port")
	}
}

// publishedPort splits "[ip:]host:container[/proto]" into host and container port.
func publishedPort(t *testing.T, spec string) (host, container string) {
	t.Helper()
	spec, _, _ = strings.Cut(spec, "/")
	parts := strings.Split(spec, ":")
	if len(parts) < 2 {
		t.Fatalf("port %q publishes no fixed host port", spec)
	}
	return parts[len(parts)-2], parts[len(parts)-1]
}

func TestComposeMountsExistingFiles(t *testing.T) {
	c := readCompose(t)
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, "./") {
				continue
			}
			if _, err := os.Stat(filepath.Join("..", src)); err != nil {
				t.Errorf("service %s mounts %s: %v", name, src, err)
			}
		}
	}
}

// The Compose Temporal gets exactly the search attributes runnerflow's workflows set.
func TestComposeRegistersTheSearchAttributes(t *testing.T) {
	data, err := os.ReadFile("compose/temporal-setup.sh")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^attribute (\S+) (\S+)$`).FindAllStringSubmatch(string(data), -1) {
		got[m[1]] = m[2]
	}
	if want := workflows.SearchAttributeTypes(); !maps.Equal(got, want) {
		t.Errorf("temporal-setup.sh registers %v, the workflows use %v", got, want)
	}
	c := readCompose(t)
	if !slices.ContainsFunc(c.Services["temporal-setup"].Volumes, func(v string) bool {
		return strings.HasPrefix(v, "./deploy/compose/temporal-setup.sh:")
	}) {
		t.Error("the temporal-setup service does not mount deploy/compose/temporal-setup.sh")
	}
}

// prometheusConfig is the part of prometheus.yml the checks read.
type prometheusConfig struct {
	Global        map[string]string `json:"global"`
	ScrapeConfigs []struct {
		JobName       string `json:"job_name"`
		StaticConfigs []struct {
			Targets []string `json:"targets"`
		} `json:"static_configs"`
	} `json:"scrape_configs"`
}

// Prometheus scrapes the worker and the starter, each on the port its command line gives
// its metrics listener.
func TestComposePrometheusScrapesBothBinaries(t *testing.T) {
	c := readCompose(t)
	data, err := os.ReadFile("compose/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg prometheusConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	scraped := map[string]string{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, err := net.SplitHostPort(target)
				if err != nil {
					t.Fatalf("job %s: target %q: %v", sc.JobName, target, err)
				}
				if _, ok := c.Services[host]; !ok {
					t.Errorf("job %s scrapes %s, which is not a Compose service", sc.JobName, host)
				}
				scraped[host] = port
			}
		}
	}
	for _, name := range []string{"worker", "starter"} {
		want := metricsPort(t, name, c.Services[name].Command)
		if scraped[name] != want {
			t.Errorf("Prometheus scrapes %s on port %q; its metrics listen on %q", name, scraped[name], want)
		}
	}
}

// The worker and starter images build from the repository's Dockerfile, and its BINARY
// argument names each one's main package.
func TestComposeBuildsTheBinariesFromTheDockerfile(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"worker", "starter"} {
		b := c.Services[name].Build
		if b == nil {
			t.Errorf("service %s is not built from the repository", name)
			continue
		}
		if b.Context != "." || (b.Dockerfile != "" && b.Dockerfile != "Dockerfile") {
			t.Errorf("service %s builds from %s/%s; want the repository's Dockerfile", name, b.Context, b.Dockerfile)
		}
		if b.Args["BINARY"] != name {
			t.Errorf("service %s builds BINARY=%q, want %q", name, b.Args["BINARY"], name)
		}
		if !isMainPackage(t, filepath.Join("..", name)) {
			t.Errorf("./%s is not a main package, so the Dockerfile cannot build it", name)
		}
	}
}

// Grafana gets Prometheus as its data source and loads the dashboard from the folder its
// provider names, which is where the Compose file mounts deploy/grafana.
func TestComposeProvisionsGrafana(t *testing.T) {
	var ds struct {
		Datasources []struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"datasources"`
	}
	readYAML(t, "compose/grafana/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("Grafana data sources %+v: want the Compose prometheus service on its port 9090", ds.Datasources)
	}
	var dash struct {
		Providers []struct {
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	readYAML(t, "compose/grafana/dashboards/runnerflow.yml", &dash)
	if len(dash.Providers) != 1 {
		t.Fatalf("want one dashboard provider, got %+v", dash.Providers)
	}
	want := "./deploy/grafana:" + dash.Providers[0].Options.Path + ":ro"
	if !slices.Contains(readCompose(t).Services["grafana"].Volumes, want) {
		t.Errorf("the grafana service does not mount %s", want)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestComposeGivesTheGitHubQueueOnePartition holds the Compose server's dynamic config to
// GitHubTaskQueuePartitions for the GitHub queue: with the server's default of four partitions
// each dispatches a quarter of the pace and a burst waits for the fullest one.
func TestComposeGivesTheGitHubQueueOnePartition(t *testing.T) {
	data, err := os.ReadFile("compose/temporal-dynamicconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type constrained struct {
		Value       any               `json:"value"`
		Constraints map[string]string `json:"constraints"`
	}
	var dc map[string][]constrained
	if err := yaml.Unmarshal(data, &dc); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"matching.numTaskqueueReadPartitions", "matching.numTaskqueueWritePartitions"} {
		found := false
		for _, v := range dc[key] {
			if v.Constraints["taskQueueName"] != workflows.GitHubTaskQueue {
				continue
			}
			found = true
			if n, ok := v.Value.(float64); !ok || int(n) != workflows.GitHubTaskQueuePartitions {
				t.Errorf("%s for %s = %v, want %d", key, workflows.GitHubTaskQueue, v.Value, workflows.GitHubTaskQueuePartitions)
			}
		}
		if !found {
			t.Errorf("%s has no value constrained to taskQueueName %s", key, workflows.GitHubTaskQueue)
		}
	}
}

// TestComposeTurnsOnEagerActivities: the Compose server hands a runner's pod activity back with
// the workflow task that scheduled it (docs/operations.md); the server's default is off.
func TestComposeTurnsOnEagerActivities(t *testing.T) {
	var dc map[string][]struct {
		Value any `json:"value"`
	}
	readYAML(t, "compose/temporal-dynamicconfig.yaml", &dc)
	vals := dc["system.enableActivityEagerExecution"]
	if len(vals) != 1 || vals[0].Value != true {
		t.Errorf("system.enableActivityEagerExecution = %+v, want one unconstrained value true", vals)
	}
}
