package testworld

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// modulePath identifies the repository root when walking up from a test's working directory
// (go test runs each package in its own folder).
const modulePath = "github.com/runnerflow/runnerflow"

// ToolPath returns the path of a tool (kube-apiserver, etcd, temporal, github-openapi.json) in the
// repository's bin/ folder, which scripts/tools.sh fills. The repository is found by walking up
// from the working directory to the go.mod of the runnerflow module.
func ToolPath(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("tool name %q must be a plain file name", name)
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	path := filepath.Join(root, "bin", name)
	info, err := os.Stat(path) // follows the symlink into the tools cache
	if err != nil {
		return "", fmt.Errorf("tool %s is not built (%w): run scripts/tools.sh to build it", name, err)
	}
	if info.IsDir() {
		return "", fmt.Errorf("tool %s at %s is a directory: run scripts/tools.sh to rebuild it", name, path)
	}
	return path, nil
}

// repoRoot walks up from the working directory to the folder whose go.mod declares the
// runnerflow module.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isRunnerflowModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " above the working directory: run tests from inside the repository")
		}
		dir = parent
	}
}

// isRunnerflowModule reports whether the go.mod at path declares the runnerflow module, so a
// nested tool module (tools/k8s, tools/temporal) is walked past.
func isRunnerflowModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == modulePath
		}
	}
	return false
}
