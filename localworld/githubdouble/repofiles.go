package githubdouble

import (
	"cmp"
	"crypto/sha1" // git names objects by SHA-1; nothing here is a secret
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
)

// A repository's files live in commits: PushFiles makes a commit of the files it is given and
// moves a branch to it. The contents endpoint serves a file at a commit, a branch, or the
// default branch; a run (StartRun) reads its workflow file at a commit.

const docsContents = "https://docs.github.com/rest/repos/contents#get-repository-content"

// contentsMaxSize is the largest file the contents endpoint gives the content of.
const contentsMaxSize = 1 << 20

// defaultBranch is every repository's default branch, as renderRepository says.
const defaultBranch = "main"

// PushSpec is a commit to add to a repository.
type PushSpec struct {
	// Repository is "owner/repo" of a repository added with AddRepository.
	Repository string
	// Branch the commit goes on; empty means "main", the default branch.
	Branch string
	// Files are the commit's files by path ("dir/name", no leading slash); the commit holds
	// these files only.
	Files map[string]string
}

// commit is a repository's tree at one commit: its files by path.
type commit struct {
	sha   string
	files map[string][]byte
}

// PushFiles adds a commit holding spec.Files to the repository, moves the branch to it and
// returns its SHA.
func (s *Server) PushFiles(spec PushSpec) (string, error) {
	files := make(map[string][]byte, len(spec.Files))
	for p, content := range spec.Files {
		if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p {
			return "", fmt.Errorf("githubdouble: file path %q is not a clean relative path", p)
		}
		files[p] = []byte(content)
	}
	branch := spec.Branch
	if branch == "" {
		branch = defaultBranch
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.st.repos[lower(spec.Repository)]
	if !ok {
		return "", fmt.Errorf("githubdouble: unknown repository %q", spec.Repository)
	}
	h := sha1.New()
	fmt.Fprintf(h, "commit %d of %s on %s\n", s.st.next("commit"), repo.fullName(), branch)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%s %s\n", blobSHA(files[p]), p)
	}
	c := &commit{sha: hex.EncodeToString(h.Sum(nil)), files: files}
	if repo.commits == nil {
		repo.commits, repo.branches = map[string]*commit{}, map[string]string{}
	}
	repo.commits[c.sha] = c
	repo.branches[branch] = c.sha
	return c.sha, nil
}

// blobSHA is git's object id of a file's content, the "sha" GitHub gives a file.
func blobSHA(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// errNoCommit is a ref that names no commit of the repository.
var errNoCommit = errors.New("no commit found for the ref")

// resolve finds the commit a ref names: a full commit SHA, a branch, or (empty) the default
// branch. Callers hold s.mu.
func (repo *repository) resolve(ref string) (*commit, error) {
	if ref == "" {
		ref = defaultBranch
	}
	if c, ok := repo.commits[lower(ref)]; ok {
		return c, nil
	}
	if sha, ok := repo.branches[ref]; ok {
		return repo.commits[sha], nil
	}
	return nil, fmt.Errorf("%w %s", errNoCommit, ref)
}

// handleGetContent serves GET /repos/{owner}/{repo}/contents/{path}: a file at the ref, as
// GitHub renders it with the default media type (content in base64, in lines of 60
// characters, and the blob's SHA); 404 for an unknown repository, ref or path.
func (s *Server) handleGetContent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.st.repos[lower(r.PathValue("owner")+"/"+r.PathValue("repo"))]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsContents)
		return
	}
	ref := r.URL.Query().Get("ref")
	c, err := repo.resolve(ref)
	if err != nil {
		writeError(w, http.StatusNotFound, "No commit found for the ref "+ref, docsContents)
		return
	}
	p := strings.Trim(r.PathValue("path"), "/")
	content, ok := c.files[p]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", docsContents)
		return
	}
	s.writeConditional(w, r, s.renderContentFile(repo, cmp.Or(ref, defaultBranch), p, content))
}

// renderContentFile renders GitHub's content-file.
func (s *Server) renderContentFile(repo *repository, ref, p string, content []byte) map[string]any {
	sha := blobSHA(content)
	self := fmt.Sprintf("%srepos/%s/contents/%s?ref=%s", s.baseURL, repo.fullName(), p, ref)
	git := fmt.Sprintf("%srepos/%s/git/blobs/%s", s.baseURL, repo.fullName(), sha)
	html := fmt.Sprintf("%s/%s/blob/%s/%s", webHost, repo.fullName(), ref, p)
	encoding, encoded := "base64", base64Lines(content)
	if len(content) > contentsMaxSize {
		// GitHub gives a file over 1 MB without its content, with encoding "none".
		encoding, encoded = "none", ""
	}
	return map[string]any{
		"type": "file", "encoding": encoding, "size": len(content), "name": path.Base(p), "path": p,
		"content": encoded, "sha": sha, "url": self, "git_url": git, "html_url": html,
		"download_url": fmt.Sprintf("https://raw.githubusercontent.com/%s/%s/%s", repo.fullName(), ref, p),
		"_links":       map[string]any{"self": self, "git": git, "html": html},
	}
}

// base64Lines encodes as GitHub does: standard base64 in lines of 60 characters, each ended
// by a newline.
func base64Lines(b []byte) string {
	enc := base64.StdEncoding.EncodeToString(b)
	var out strings.Builder
	for len(enc) > 60 {
		out.WriteString(enc[:60] + "\n")
		enc = enc[60:]
	}
	if enc != "" {
		out.WriteString(enc + "\n")
	}
	return out.String()
}
