package deploy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// binaryInfo is what a binary really accepts: the flags its -h output lists (with defaults)
// and the environment variables its sources read.
type binaryInfo struct {
	flags map[string]flagHelp
	env   map[string]bool
}

// flagHelp is one flag's entry in -h output.
type flagHelp struct {
	def   string // the printed default; "" when none is printed
	usage string
}

var (
	binDirOnce sync.Once
	binDir     string
	binDirErr  error
	binMu      sync.Mutex
	binInfos   = map[string]*binaryInfo{}
)

// binary builds the main package ./<name> of the repository once per test process and reads
// its flags from `<name> [subcommand] -h`.
func binary(t *testing.T, name string, subcommand ...string) *binaryInfo {
	t.Helper()
	key := strings.Join(append([]string{name}, subcommand...), " ")
	binMu.Lock()
	defer binMu.Unlock()
	if info, ok := binInfos[key]; ok {
		return info
	}
	binDirOnce.Do(func() { binDir, binDirErr = os.MkdirTemp("", "deploy-bin-") })
	if binDirErr != nil {
		t.Fatal(binDirErr)
	}
	path := filepath.Join(binDir, name)
	if _, err := os.Stat(path); err != nil {
		build := exec.Command("go", "build", "-o", path, "./"+name)
		build.Dir = ".."
		build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build ./%s: %v\n%s", name, err, out)
		}
	}
	help := exec.Command(path, append(subcommand, "-h")...)
	// A clean environment, so defaults taken from environment variables show as built in.
	help.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	out, _ := help.CombinedOutput() // -h exits non-zero with some flag libraries; the text is what counts
	info := &binaryInfo{flags: parseFlagHelp(string(out)), env: envVarsRead(t, filepath.Join("..", name))}
	if len(info.flags) == 0 {
		t.Fatalf("`%s -h` lists no flags:\n%s", key, out)
	}
	binInfos[key] = info
	return info
}

var (
	flagLine    = regexp.MustCompile(`^\s+-{1,2}([A-Za-z0-9][-A-Za-z0-9._]*)(?:[ =]\S+)?\s*$`)
	defaultText = regexp.MustCompile(`\(default ("(?:[^"\\]|\\.)*"|[^)]*)\)`)
)

// parseFlagHelp reads the flag package's usage text: "  -name type" lines, each followed by
// its indented usage, which ends with "(default ...)" when the default is not the zero value.
func parseFlagHelp(text string) map[string]flagHelp {
	flags := map[string]flagHelp{}
	current := ""
	for _, line := range strings.Split(text, "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			current = m[1]
			flags[current] = flagHelp{}
			continue
		}
		if current == "" || strings.TrimSpace(line) == "" {
			continue
		}
		h := flags[current]
		h.usage = strings.TrimSpace(h.usage + " " + strings.TrimSpace(line))
		if m := defaultText.FindStringSubmatch(line); m != nil {
			h.def = m[1]
			if unq, err := strconv.Unquote(h.def); err == nil {
				h.def = unq
			}
		}
		flags[current] = h
	}
	return flags
}

// envVarsRead collects the environment variable names a main package, the module's packages
// it imports directly and the libraries in envReadingLibraries that those import read: string
// literals that look like variable names and are passed to os.Getenv, os.LookupEnv or a helper
// whose name says env.
func envVarsRead(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	dirs := []string{dir}
	seen := map[string]bool{}
	for i := 0; i < len(dirs); i++ {
		files, err := filepath.Glob(filepath.Join(dirs[i], "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			collectEnvNames(file, names)
			for _, imp := range file.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if seen[p] {
					continue
				}
				if rel, ok := strings.CutPrefix(p, "github.com/runnerflow/runnerflow/"); ok && i == 0 {
					seen[p] = true
					dirs = append(dirs, filepath.Join("..", rel))
				} else if slices.Contains(envReadingLibraries, p) {
					seen[p] = true
					dirs = append(dirs, packageDir(t, p))
				}
			}
		}
	}
	return names
}

// envReadingLibraries read environment variables on the binaries' behalf: the SDK's envconfig
// reads the temporal CLI's TEMPORAL_* variables for internal/temporalconn.
var envReadingLibraries = []string{"go.temporal.io/sdk/contrib/envconfig"}

// packageDir is the folder of an imported package's source, in the module cache.
func packageDir(t *testing.T, pkg string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.TrimSpace(string(out))
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{2,}$`)

func collectEnvNames(file *ast.File, names map[string]bool) {
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 || !strings.Contains(strings.ToLower(calleeName(call.Fun)), "env") {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(s) {
				names[s] = true
			}
		}
		return true
	})
}

func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// commandFlags splits a container command line into its subcommand words and its
// "--name=value" flags. Only the "=" form is accepted, so a flag's value is never mistaken
// for the next flag or a subcommand.
func commandFlags(t *testing.T, args []string) (sub []string, flags map[string]string) {
	t.Helper()
	flags = map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			if len(flags) > 0 {
				t.Errorf("argument %q after flags: write flags as --name=value after the subcommand", a)
			}
			sub = append(sub, a)
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			t.Errorf("flag %q: write it as --name=value", a)
		}
		flags[name] = value
	}
	return sub, flags
}
