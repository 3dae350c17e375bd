package githubdouble

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-github/v92/github"
)

func TestContentsServesAFileAtARef(t *testing.T) {
	w := startWorld(t, Config{})
	c := w.client(testToken, nil)
	ctx := context.Background()
	long := strings.Repeat("jobs: {}\n", 20) // more than one 60-character line of base64
	first, err := w.PushFiles(PushSpec{Repository: "acme/app", Files: map[string]string{".github/workflows/ci.yml": "hello\n"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.PushFiles(PushSpec{Repository: "acme/app", Files: map[string]string{".github/workflows/ci.yml": long}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ref, want string
	}{
		{"", long},     // the default branch's head
		{"main", long}, // a branch
		{first, "hello\n"},
	}
	for _, tc := range cases {
		f, _, resp, err := c.Repositories.GetContents(ctx, "acme", "app", ".github/workflows/ci.yml", &github.RepositoryContentGetOptions{Ref: tc.ref})
		if err != nil {
			t.Fatalf("ref %q: %v", tc.ref, err)
		}
		got, err := f.GetContent()
		if err != nil || got != tc.want || resp.StatusCode != http.StatusOK {
			t.Fatalf("ref %q: content %q (%v), want %q", tc.ref, got, err, tc.want)
		}
		if f.GetEncoding() != "base64" || f.GetType() != "file" || f.GetName() != "ci.yml" || f.GetSize() != len(tc.want) {
			t.Fatalf("ref %q: file %+v", tc.ref, f)
		}
		if tc.ref == first && f.GetSHA() != "ce013625030ba8dba906f756967f9e9ca394464a" { // git hash-object of "hello\n"
			t.Fatalf("sha %s, want git's blob id", f.GetSHA())
		}
		if strings.Contains(strings.TrimSuffix(*f.Content, "\n"), "\n") != (len(tc.want) > 45) {
			t.Fatalf("ref %q: base64 not in GitHub's 60-character lines: %q", tc.ref, *f.Content)
		}
	}
	for _, tc := range []struct{ repo, path, ref string }{
		{"app", ".github/workflows/missing.yml", ""},
		{"app", ".github/workflows/ci.yml", "nosuchbranch"},
		{"lib", ".github/workflows/ci.yml", ""}, // a repository without commits
		{"nosuchrepo", ".github/workflows/ci.yml", ""},
	} {
		_, _, resp, err := c.Repositories.GetContents(ctx, "acme", tc.repo, tc.path, &github.RepositoryContentGetOptions{Ref: tc.ref})
		if resp == nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s at %q: %v, want 404", tc.repo, tc.path, tc.ref, err)
		}
	}
}

func TestPushFilesRefusesBadPaths(t *testing.T) {
	w := startWorld(t, Config{})
	for _, p := range []string{"", "/abs.yml", "a/../b.yml", "a//b.yml"} {
		if _, err := w.PushFiles(PushSpec{Repository: "acme/app", Files: map[string]string{p: "x"}}); err == nil {
			t.Errorf("PushFiles accepted path %q", p)
		}
	}
	if _, err := w.PushFiles(PushSpec{Repository: "acme/nope", Files: map[string]string{"a": "x"}}); err == nil {
		t.Error("PushFiles accepted an unknown repository")
	}
}
