package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The list of changes and the GetVersion calls stay in step: every id a call asks is listed,
// once, and every listed id is asked by a call.
func TestChangesListEveryGetVersionID(t *testing.T) {
	asked := getVersionIDs(t)
	listed := map[string]bool{}
	for _, c := range Changes {
		if listed[c.ID] {
			t.Errorf("change %q is listed twice", c.ID)
		}
		listed[c.ID] = true
		if _, ok := asked[c.ID]; !ok {
			t.Errorf("change %q is listed but no GetVersion call asks it (retire it by the rule in changes.go)", c.ID)
		}
	}
	for id, where := range asked {
		if !listed[id] {
			t.Errorf("GetVersion at %s asks %q, which workflows.Changes does not list", where, id)
		}
	}
}

// Each listed change names a registered workflow type, a release and what it changes.
func TestChangesAreDescribed(t *testing.T) {
	types := map[string]bool{}
	for _, d := range Definitions {
		types[d.Name] = true
	}
	release := regexp.MustCompile(`^v[0-9]+$`)
	for _, c := range Changes {
		if !types[c.Workflow] {
			t.Errorf("change %q names workflow %q, not a registered workflow type", c.ID, c.Workflow)
		}
		if !release.MatchString(c.Release) {
			t.Errorf("change %q names release %q, want v<N>", c.ID, c.Release)
		}
		if strings.TrimSpace(c.What) == "" {
			t.Errorf("change %q does not say what it changes", c.ID)
		}
	}
}

// getVersionIDs parses the package's (non-test) sources and returns the change id of every
// workflow.GetVersion call, with where the call is; an id is a string constant or literal.
func getVersionIDs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	consts := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		collectStringConsts(f, consts)
	}
	ids := map[string]string{}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isGetVersion(call.Fun) {
				return true
			}
			where := fset.Position(call.Pos()).String()
			if len(call.Args) < 2 {
				t.Errorf("GetVersion at %s has no change id", where)
				return true
			}
			id, ok := stringValue(call.Args[1], consts)
			if !ok {
				t.Errorf("GetVersion at %s: the change id is neither a string constant nor a literal", where)
				return true
			}
			ids[id] = where
			return true
		})
	}
	if len(ids) == 0 {
		t.Fatal("no GetVersion call found: the parse is broken")
	}
	return ids
}

func isGetVersion(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "GetVersion" {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "workflow"
}

// collectStringConsts records the package-level constants whose value is a string literal.
func collectStringConsts(f *ast.File, consts map[string]string) {
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if v, ok := stringValue(vs.Values[i], nil); ok {
						consts[name.Name] = v
					}
				}
			}
		}
	}
}

func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[v.Name]
		return s, ok
	}
	return "", false
}
