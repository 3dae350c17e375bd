// Package runnerflow holds the release (VERSION, read by version.go) and the test that keeps
// the repository's one direction of imports (docs/layout.md): the product may be used by the
// local world, never the reverse.
package runnerflow

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/runnerflow/runnerflow"

// world lists the folders that are not the product: the local world the demo, the benchmark and
// the tests run in, the end-to-end tests, and the two entry points of the world.
var world = []string{
	module + "/localworld",
	module + "/integration",
	module + "/demo",
	module + "/bench",
}

// inWorld reports whether the package at path is part of the local world.
func inWorld(path string) bool {
	for _, w := range world {
		if path == w || strings.HasPrefix(path, w+"/") {
			return true
		}
	}
	return false
}

// TestProductNeverImportsTheWorld fails when a product package (every package of the module
// outside the world's folders, the worker and starter binaries among them) depends, directly or
// through other packages, on a package of the local world. Tests of the product may use the
// world; the code that ships may not.
func TestProductNeverImportsTheWorld(t *testing.T) {
	var product, worldPkgs []string
	for _, p := range goList(t, "./...") {
		if inWorld(p) {
			worldPkgs = append(worldPkgs, p)
		} else {
			product = append(product, p)
		}
	}
	for _, want := range []string{module + "/worker", module + "/starter"} {
		if !slices.Contains(product, want) {
			t.Fatalf("%s is not among the product packages %v: the test would check nothing", want, product)
		}
	}
	if !slices.Contains(worldPkgs, module+"/localworld/testworld") {
		t.Fatalf("no localworld/testworld among %v: the world's folders moved, update the world list", worldPkgs)
	}
	args := append([]string{"-f", `{{.ImportPath}} {{join .Deps " "}}`}, product...)
	for _, line := range goList(t, args...) {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if inWorld(dep) {
				t.Errorf("product package %s depends on %s, a package of the local world", fields[0], dep)
			}
		}
	}
}

// goList runs `go list` with args in the repository and returns its output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += "\n" + string(ee.Stderr)
		}
		t.Fatalf("go list %v: %s", args, msg)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
