package deploy_test

import (
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// listenFlag finds the binary's flag for its word ("metrics", "webhook") listener: a flag
// whose name or usage speaks of that word and of a listener or address, and whose default is
// empty or host:port. It fails unless there is exactly one, so a renamed or reworded flag
// shows up here instead of as a dead scrape target.
func listenFlag(t *testing.T, name string, info *binaryInfo, word string) string {
	t.Helper()
	var found []string
	for f, h := range info.flags {
		text := strings.ToLower(f + " " + h.usage)
		if !strings.Contains(text, word) || !(strings.Contains(text, "listen") || strings.Contains(text, "address")) {
			continue
		}
		if _, _, err := net.SplitHostPort(h.def); err == nil || h.def == "" {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one %s listen-address flag, found %v among %v", name, word, found, slices.Sorted(maps.Keys(info.flags)))
	}
	return found[0]
}

// listenPort is the port a binary started with args listens on for word ("metrics",
// "webhook"): the flag's value on the command line, else its default.
func listenPort(t *testing.T, name string, args []string, word string) string {
	t.Helper()
	sub, flags := commandFlags(t, args)
	info := binary(t, name, sub...)
	f := listenFlag(t, name, info, word)
	addr, ok := flags[f]
	if !ok {
		addr = info.flags[f].def
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s --%s=%q: %v", name, f, addr, err)
	}
	return port
}

// metricsPort is the port the named Compose service's binary serves /metrics on.
func metricsPort(t *testing.T, name string, command []string) string {
	t.Helper()
	return listenPort(t, name, command, "metrics")
}

// checkInvocation fails for every flag the binary does not define and every environment
// variable it never reads (expanded names in args, like $(GITHUB_APP_ID), are used by
// Kubernetes itself and need not be read).
func checkInvocation(t *testing.T, name string, args []string, env []string) {
	t.Helper()
	sub, flags := commandFlags(t, args)
	info := binary(t, name, sub...)
	for f := range flags {
		if _, ok := info.flags[f]; !ok {
			t.Errorf("%s: flag --%s is not defined by `%s -h` (defined: %v)", name, f, strings.Join(append([]string{name}, sub...), " "), slices.Sorted(maps.Keys(info.flags)))
		}
	}
	joined := strings.Join(args, " ")
	for _, e := range env {
		if !info.env[e] && !strings.Contains(joined, "$("+e+")") {
			t.Errorf("%s: environment variable %s is never read by the binary (it reads %v)", name, e, slices.Sorted(maps.Keys(info.env)))
		}
	}
}

func TestComposeUsesOnlyRealFlagsAndEnvironment(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"worker", "starter"} {
		s := c.Services[name]
		checkInvocation(t, name, s.Command, slices.Sorted(maps.Keys(s.Environment)))
	}
	// The published webhook port reaches the starter's webhook listener.
	want := listenPort(t, "starter", c.Services["starter"].Command, "webhook")
	published := false
	for _, p := range c.Services["starter"].Ports {
		if _, container := publishedPort(t, p); container == want {
			published = true
		}
	}
	if !published {
		t.Errorf("the starter's webhook listens on %s, which the starter service does not publish (%v)", want, c.Services["starter"].Ports)
	}
}

func TestDeploymentsUseOnlyRealFlagsAndEnvironment(t *testing.T) {
	objs := renderBase(t)
	for _, name := range []string{"worker", "starter"} {
		var d appsv1.Deployment
		typed(t, objs, "Deployment", "runnerflow-"+name, &d)
		c := d.Spec.Template.Spec.Containers[0]
		if len(c.Command) > 0 {
			t.Errorf("%s: command overrides the image's entrypoint; give the binary args only", name)
		}
		var env []string
		for _, e := range c.Env {
			env = append(env, e.Name)
		}
		checkInvocation(t, name, c.Args, env)
		if p := containerPort(c, "metrics"); p != listenPort(t, name, c.Args, "metrics") {
			t.Errorf("%s: the container's metrics port is %s, the binary's metrics listener %s", name, p, listenPort(t, name, c.Args, "metrics"))
		}
	}
	var starter appsv1.Deployment
	typed(t, objs, "Deployment", "runnerflow-starter", &starter)
	c := starter.Spec.Template.Spec.Containers[0]
	if p := containerPort(c, "webhook"); p != listenPort(t, "starter", c.Args, "webhook") {
		t.Errorf("starter: the container's webhook port is %s, the binary's webhook listener %s", p, listenPort(t, "starter", c.Args, "webhook"))
	}
}

func containerPort(c corev1.Container, name string) string {
	for _, p := range c.Ports {
		if p.Name == name {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	return ""
}

// The worker watches pods through its namespaced Role, so it must be told to watch its own
// namespace only: watching all namespaces would be refused.
func TestWorkerWatchesOnlyItsNamespace(t *testing.T) {
	var d appsv1.Deployment
	typed(t, renderBase(t), "Deployment", "runnerflow-worker", &d)
	_, flags := commandFlags(t, d.Spec.Template.Spec.Containers[0].Args)
	var got []string
	for f, v := range flags {
		if regexp.MustCompile(`watch.*namespace|runner.*namespace`).MatchString(f) {
			got = append(got, f+"="+v)
		}
	}
	if len(got) != 1 || !strings.HasSuffix(got[0], "=runnerflow") {
		t.Errorf("the worker's namespace flags %v: want it to watch runnerflow only", got)
	}
}
