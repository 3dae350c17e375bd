package poolspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/workflows"
)

const validPool = `
name: linux-small
organization: acme
labels: [linux, small]
minReplicas: 1
maxReplicas: 5
template:
  spec:
    containers:
    - name: runner
      image: ghcr.io/actions/actions-runner:2.320.0
`

func TestParseValidPoolAppliesDefaults(t *testing.T) {
	pools, err := Parse([]byte(validPool))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(pools) != 1 {
		t.Fatalf("got %d pools, want 1", len(pools))
	}
	p := pools[0]
	if p.Name != "linux-small" || p.Organization != "acme" || *p.MaxReplicas != 5 || p.MinReplicas != 1 {
		t.Errorf("decoded %+v", p)
	}
	if !p.IsEphemeral() || p.Namespace != "default" {
		t.Errorf("defaults: ephemeral=%v namespace=%q", p.IsEphemeral(), p.Namespace)
	}
	if p.ScaleDownDelayOrDefault() != workflows.DefaultScaleDownDelay ||
		p.ReservationDurationOrDefault() != workflows.DefaultReservationDuration ||
		p.RegistrationTimeoutOrDefault() != workflows.DefaultRegistrationTimeout {
		t.Errorf("duration defaults not applied: %+v", p)
	}
}

func TestParseClusters(t *testing.T) {
	pools, err := Parse([]byte(validPool + "clusters: [east, west]\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := pools[0].Clusters; len(got) != 2 || got[0] != "east" || got[1] != "west" {
		t.Errorf("clusters %v, want [east west] in order", got)
	}
}

func TestParseSeveralPoolsInStreamAndList(t *testing.T) {
	second := strings.Replace(validPool, "linux-small", "linux-large", 1)
	file := validPool + "\n---\npools:\n" + indentList(second) + "\n---\n# trailing empty document\n"
	pools, err := Parse([]byte(file))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(pools) != 2 || pools[0].Name != "linux-small" || pools[1].Name != "linux-large" {
		t.Fatalf("got %+v", names(pools))
	}
}

func TestParseExplicitValues(t *testing.T) {
	pools, err := Parse([]byte(validPool + `
ephemeral: false
scaleDownDelay: 90s
reservationDuration: 1h
registrationTimeout: 5m
namespace: ci
minIdle: 2
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	p := pools[0]
	if p.IsEphemeral() || p.ScaleDownDelayOrDefault() != 90*time.Second || p.ReservationDurationOrDefault() != time.Hour ||
		p.RegistrationTimeoutOrDefault() != 5*time.Minute || p.Namespace != "ci" || p.MinIdle != 2 {
		t.Errorf("decoded %+v", p)
	}
}

// Each invalid file must fail with a message that names the field (and nothing is returned).
func TestParseRejectsWithFieldPath(t *testing.T) {
	cases := []struct {
		name string
		file string
		want string
	}{
		{"max below min", replace(validPool, "minReplicas: 1", "minReplicas: 7"), "pools[0].maxReplicas: Invalid value: 5: must be >= minReplicas (7)"},
		{"max below min in second pool", validPool + "---\n" + replace(replace(validPool, "linux-small", "b"), "maxReplicas: 5", "maxReplicas: 0"), "pools[1].maxReplicas: Invalid value: 0: must be >= minReplicas (1)"},
		{"missing max", replace(validPool, "maxReplicas: 5", ""), "pools[0].maxReplicas: Required value"},
		{"negative min", replace(validPool, "minReplicas: 1", "minReplicas: -1"), "pools[0].minReplicas: Invalid value: -1: must be >= 0"},
		{"max too large", replace(validPool, "maxReplicas: 5", "maxReplicas: 100000"), "pools[0].maxReplicas: Invalid value: 100000: must be <= 1000"},
		{"minIdle above max", validPool + "minIdle: 9\n", "pools[0].minIdle: Invalid value: 9: must be <= maxReplicas (5)"},
		{"bad name", replace(validPool, "linux-small", "Linux_Small"), "pools[0].name: Invalid value: \"Linux_Small\""},
		{"long name", replace(validPool, "linux-small", strings.Repeat("a", 45)), "pools[0].name: Too long"},
		{"no name", replace(validPool, "name: linux-small", ""), "pools[0].name: Required value"},
		{"no scope", replace(validPool, "organization: acme", ""), "pools[0].repository: Required value: exactly one of repository, organization or enterprise"},
		{"two scopes", validPool + "repository: acme/app\n", "pools[0].organization: Forbidden: exactly one of repository, organization or enterprise may be set (repository is set too)"},
		{"bad repository", replace(validPool, "organization: acme", "repository: acme"), `pools[0].repository: Invalid value: "acme": must be "owner/repo"`},
		{"runner group on a repository", replace(validPool, "organization: acme", "repository: acme/app\nrunnerGroup: builders"), `pools[0].runnerGroup: Invalid value: "builders": runner groups exist only for organizations and enterprises`},
		{"bad enterprise", replace(validPool, "organization: acme", "enterprise: Big Corp"), "pools[0].enterprise: Invalid value"},
		{"no labels", replace(validPool, "labels: [linux, small]", "labels: []"), "pools[0].labels: Required value"},
		{"label with comma", replace(validPool, "[linux, small]", `[linux, "a,b"]`), "pools[0].labels[1]: Invalid value: \"a,b\": must not contain commas or whitespace"},
		{"duplicate label", replace(validPool, "[linux, small]", "[linux, Linux]"), "pools[0].labels[1]: Duplicate value"},
		{"unknown field", validPool + "maxReplica: 3\n", "pools[0].maxReplica: Forbidden: unknown field"},
		{"wrong case", validPool + "MinIdle: 3\n", "pools[0].MinIdle: Forbidden: unknown field"},
		{"unknown nested field", replace(validPool, "      image:", "      imagee: x\n      image:"), "pools[0].template.spec.containers[0].imagee: Forbidden: unknown field"},
		{"duplicate key", validPool + "minReplicas: 2\n", "YAML: "},
		{"wrong type", replace(validPool, "minReplicas: 1", "minReplicas: one"), `pools[0].minReplicas: Invalid value: "one": must be an integer, not a string`},
		{"bad duration", validPool + "scaleDownDelay: soon\n", `pools[0].scaleDownDelay: Invalid value: "soon": time: invalid duration "soon"`},
		{"negative duration", validPool + "reservationDuration: -1m\n", "pools[0].reservationDuration: Invalid value: \"-1m0s\": must be > 0"},
		{"bad cluster name", validPool + "clusters: [east, West_1]\n", `pools[0].clusters[1]: Invalid value: "West_1"`},
		{"cluster twice", validPool + "clusters: [east, west, east]\n", `pools[0].clusters[2]: Duplicate value: "east"`},
		{"cluster not a list", validPool + "clusters: east\n", "pools[0].clusters: Invalid value"},
		{"warm registrations on clusters", validPool + "clusters: [east]\nwarmRegistrations: 2\n", "pools[0].warmRegistrations: Forbidden: a pool placed on clusters keeps no warm registrations"},
		{"zero timeout", validPool + "registrationTimeout: 0s\n", "pools[0].registrationTimeout: Invalid value: \"0s\": must be > 0"},
		{"bad quantity", replace(validPool, "      image: ghcr.io/actions/actions-runner:2.320.0", "      image: x\n      resources: {limits: {cpu: lots}}"), "pools[0].template.spec.containers[0].resources.limits[cpu]: Invalid value"},
		{"no runner container", replace(validPool, "name: runner", "name: worker"), `pools[0].template.spec.containers: Required value: a container named "runner" is required`},
		{"no image", replace(validPool, "      image: ghcr.io/actions/actions-runner:2.320.0", ""), "pools[0].template.spec.containers[0].image: Required value"},
		{"restart always", replace(validPool, "    containers:", "    restartPolicy: Always\n    containers:"), "pools[0].template.spec.restartPolicy: Unsupported value: \"Always\""},
		{"reserved label", replace(validPool, "template:\n", "template:\n  metadata:\n    labels:\n      runnerflow.dev/pool: x\n"), "pools[0].template.metadata.labels[runnerflow.dev/pool]: Forbidden"},
		{"reserved env", validPool + "      env: [{name: ACTIONS_RUNNER_INPUT_JITCONFIG, value: x}]\n", "pools[0].template.spec.containers[0].env[0].name: Forbidden"},
		{"mount of unknown volume", validPool + "      volumeMounts: [{name: cache, mountPath: /cache}]\n", `pools[0].template.spec.containers[0].volumeMounts[0].name: Not found: "cache"`},
		{"claim not mounted", validPool + claim, "pools[0].volumeClaimTemplates[0].metadata.name: Invalid value: \"cache\": is not mounted"},
		{"claim without storage", validPool + "      volumeMounts: [{name: cache, mountPath: /cache}]\n" + strings.Replace(claim, "      resources: {requests: {storage: 1Gi}}\n", "", 1), "pools[0].volumeClaimTemplates[0].spec.resources.requests.storage: Required value"},
		{"override end before start", validPool + "scheduledOverrides:\n- {startTime: \"2024-01-01T10:00:00Z\", endTime: \"2024-01-01T09:00:00Z\", minReplicas: 2}\n", "pools[0].scheduledOverrides[0].endTime: Invalid value: \"2024-01-01T09:00:00Z\": must be after startTime"},
		{"override frequency", validPool + "scheduledOverrides:\n- {startTime: \"2024-01-01T10:00:00Z\", endTime: \"2024-01-01T11:00:00Z\", minReplicas: 2, recurrenceRule: {frequency: Hourly}}\n", `pools[0].scheduledOverrides[0].recurrenceRule.frequency: Unsupported value: "Hourly"`},
		{"override bad time", validPool + "scheduledOverrides:\n- {startTime: tomorrow, endTime: \"2024-01-01T11:00:00Z\", minReplicas: 2}\n", "pools[0].scheduledOverrides[0].startTime: Invalid value"},
		{"override nothing", validPool + "scheduledOverrides:\n- {startTime: \"2024-01-01T10:00:00Z\", endTime: \"2024-01-01T11:00:00Z\"}\n", "pools[0].scheduledOverrides[0].minReplicas: Required value"},
		{"duplicate pool names", validPool + "---\n" + validPool, `pools[1].name: Duplicate value: "linux-small (also pools[0].name)"`},
		{"bad YAML", validPool + "labels: [unclosed\n", "YAML: line "},
		{"not a mapping", "- a\n- b\n", "document at line 1: must be a pool"},
		{"pools not a list", "pools: 3\n", "document at line 1: pools: must be a list of pools"},
		{"extra key next to pools", "pools: []\nextra: 1\n", "document at line 1: extra: unknown field"},
		{"empty file", "\n# nothing\n", "no pools found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pools, err := Parse([]byte(tc.file))
			if err == nil {
				t.Fatalf("Parse accepted the file; want an error containing %q", tc.want)
			}
			if pools != nil {
				t.Errorf("Parse returned %d pools with an error; want none", len(pools))
			}
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %T is not *poolspec.Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n%v\ndoes not contain %q", err, tc.want)
			}
		})
	}
}

// One bad pool among good ones rejects the whole file, and every problem is listed.
func TestParseReportsEveryProblem(t *testing.T) {
	bad := replace(replace(validPool, "linux-small", "b"), "maxReplicas: 5", "maxReplicas: 0")
	file := validPool + "---\n" + bad + "unknownKey: 1\n---\n" + replace(validPool, "linux-small", "c") + "minIdle: -2\n"
	_, err := Parse([]byte(file))
	if err == nil {
		t.Fatal("Parse accepted a file with invalid pools")
	}
	for _, want := range []string{"pools[1].unknownKey", "pools[2].minIdle"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%v\ndoes not name %s", err, want)
		}
	}
}

func TestParseYAMLErrorLineIsFileLine(t *testing.T) {
	file := validPool + "---\nname: x\nlabels: [a\n"
	_, err := Parse([]byte(file))
	if err == nil {
		t.Fatal("Parse accepted broken YAML")
	}
	// validPool has 10 lines; the second document starts on line 12 and breaks on line 13 or 14.
	if !strings.Contains(err.Error(), "line 1") || strings.Contains(err.Error(), "line 2:") {
		t.Errorf("error %v does not give a file line", err)
	}
}

const claim = `volumeClaimTemplates:
- metadata: {name: cache}
  spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`

func TestParseStatefulPool(t *testing.T) {
	pools, err := Parse([]byte(validPool + "      volumeMounts: [{name: cache, mountPath: /cache}]\n" + claim))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !pools[0].Stateful() {
		t.Error("pool with volumeClaimTemplates is not stateful")
	}
}

func replace(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("test fixture does not contain " + old)
	}
	return strings.Replace(s, old, new, 1)
}

func indentList(doc string) string {
	lines := strings.Split(strings.TrimSpace(doc), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = "- " + l
		} else {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n")
}

func names(pools []workflows.PoolSpec) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.Name)
	}
	return out
}

// The example in docs/pools.md must stay a valid pools file.
func TestDocumentedExampleIsValid(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "pools.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/pools.md has no yaml example")
	}
	pools, err := Parse([]byte(example))
	if err != nil {
		t.Fatalf("documented example: %v", err)
	}
	if len(pools) != 2 || !pools[0].Stateful() || pools[1].IsEphemeral() || len(pools[0].ScheduledOverrides) != 1 {
		t.Errorf("documented example decoded as %+v", names(pools))
	}
}
