package deploy_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// isMainPackage reports whether dir holds Go files of package main.
func isMainPackage(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if file.Name.Name == "main" {
			return true
		}
	}
	return false
}

// The Dockerfile builds the package BINARY names with a Go at least as new as go.mod asks for,
// statically, and runs it as a non-root user on a minimal base.
func TestDockerfileBuildsAStaticNonRootImage(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ARG BINARY=\w+$`),
		regexp.MustCompile(`(?m)go build .*\./\$\{BINARY\}$`),
		regexp.MustCompile(`(?m)CGO_ENABLED=0`),
		regexp.MustCompile(`(?m)^FROM gcr\.io/distroless/static[-\w]*:nonroot$`),
		regexp.MustCompile(`(?m)^USER 65532(:65532)?$`),
	} {
		if !want.MatchString(df) {
			t.Errorf("the Dockerfile lacks a line matching %s", want)
		}
	}
	m := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindStringSubmatch(df)
	if m == nil || !strings.Contains(df, "FROM golang:${GO_VERSION}") {
		t.Fatal("the Dockerfile's build stage is not FROM golang:${GO_VERSION} with a default GO_VERSION")
	}
	modData, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(modData)
	if goLine == nil {
		t.Fatal("go.mod has no go directive")
	}
	if majorMinor(t, m[1]) < majorMinor(t, string(goLine[1])) {
		t.Errorf("the Dockerfile builds with Go %s; go.mod needs %s", m[1], goLine[1])
	}
}

// majorMinor turns "1.26" or "1.26.0" into a comparable number (1026).
func majorMinor(t *testing.T, v string) int {
	t.Helper()
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("Go version %q has no minor version", v)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		t.Fatalf("Go version %q is not numeric", v)
	}
	return major*1000 + minor
}
