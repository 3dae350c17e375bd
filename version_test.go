package runnerflow

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/runnerflow/runnerflow/workflows"
)

// changelog is what CHANGELOG.md says of the releases.
type changelog struct {
	// next is the release the Unreleased section announces ("" when there is none: between a
	// release commit and the one that names it).
	next string
	// releases are the `## v<N>` sections, in the file's order (newest first).
	releases []releaseSection
}

// releaseSection is one `## v<N>` section and the commit its `Commit:` line names.
type releaseSection struct {
	release string
	commit  string // "" when the line is missing or names no hash
}

var (
	headingRE    = regexp.MustCompile(`(?m)^## (.*)$`)
	releaseRE    = regexp.MustCompile(`^v[1-9][0-9]*$`)
	unreleasedRE = regexp.MustCompile(`^Unreleased \(the next release, (v[1-9][0-9]*)\)$`)
	// commitRE: the first line of a release section names its commit by an abbreviated hash;
	// what follows the hash (a date, a reason) is free.
	commitRE = regexp.MustCompile(`^\s*Commit: ([0-9a-f]{7,40})\b`)
)

// readChangelog parses CHANGELOG.md's headings; any `## ` heading that is neither a release nor
// the Unreleased section fails the test, so a misspelt one cannot hide a release.
func readChangelog(t *testing.T) changelog {
	t.Helper()
	raw, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	var cl changelog
	for i, loc := range headingRE.FindAllStringSubmatchIndex(text, -1) {
		heading := text[loc[2]:loc[3]]
		if m := unreleasedRE.FindStringSubmatch(heading); m != nil {
			if i != 0 || cl.next != "" {
				t.Errorf("CHANGELOG.md: %q must be the first section, and the only one of its kind", heading)
			}
			cl.next = m[1]
			continue
		}
		if !releaseRE.MatchString(heading) {
			t.Errorf("CHANGELOG.md: section %q is neither a release (## v<N>) nor %q", heading, "Unreleased (the next release, v<N>)")
			continue
		}
		s := releaseSection{release: heading}
		if m := commitRE.FindStringSubmatch(strings.TrimLeft(text[loc[1]:], "\n")); m != nil {
			s.commit = m[1]
		}
		cl.releases = append(cl.releases, s)
	}
	return cl
}

// number is a release's N; releases are compared by it (v10 after v9).
func number(t *testing.T, release string) int {
	t.Helper()
	if !releaseRE.MatchString(release) {
		t.Fatalf("release %q is not v<N>", release)
	}
	n, _ := strconv.Atoi(release[1:])
	return n
}

// The release in VERSION is the newest section of CHANGELOG.md; the sections run down from it to
// v1 with none missing, each naming its commit by hash; the Unreleased section, when there is
// one, announces the release after VERSION.
func TestChangelogDescribesTheRelease(t *testing.T) {
	version := number(t, Version())
	cl := readChangelog(t)
	if len(cl.releases) == 0 || cl.releases[0].release != Version() {
		t.Fatalf("CHANGELOG.md's newest release section is %v, want ## %s first", cl.releases, Version())
	}
	for i, s := range cl.releases {
		if want := "v" + strconv.Itoa(version-i); s.release != want {
			t.Errorf("CHANGELOG.md's release section %d is ## %s, want ## %s (newest first, none missing)", i+1, s.release, want)
		}
		if s.commit == "" {
			t.Errorf("## %s: the line after the heading must be `Commit: <abbreviated hash>`", s.release)
		}
	}
	if len(cl.releases) != version {
		t.Errorf("CHANGELOG.md has %d release sections, want v%d down to v1", len(cl.releases), version)
	}
	if cl.next != "" && number(t, cl.next) != version+1 {
		t.Errorf("the Unreleased section announces %s, want v%d (VERSION is %s)", cl.next, version+1, Version())
	}
}

// Every gate in workflows.Changes belongs to a release CHANGELOG.md has a section for, or to the
// next release its Unreleased section announces; gates are listed in the order they landed, so
// their releases never go back. A gate of the next release without an Unreleased section, or of
// a release past it, means VERSION and the gates no longer agree.
func TestGatesBelongToReleases(t *testing.T) {
	version := number(t, Version())
	cl := readChangelog(t)
	released := map[string]bool{}
	for _, s := range cl.releases {
		released[s.release] = true
	}
	newestReleased, last := 0, 0
	for _, c := range workflows.Changes {
		n := number(t, c.Release)
		switch {
		case released[c.Release]:
			newestReleased = max(newestReleased, n)
		case c.Release != cl.next:
			t.Errorf("gate %s names release %s: CHANGELOG.md has no section for it and its Unreleased section announces %q", c.ID, c.Release, cl.next)
		}
		if n < last {
			t.Errorf("gate %s names %s after a gate of v%d: workflows.Changes lists gates in the order they landed", c.ID, c.Release, last)
		}
		last = max(last, n)
	}
	if newestReleased > version {
		t.Errorf("the newest released gate's release is v%d, past VERSION %s", newestReleased, Version())
	}
}

// Every release's `Commit:` resolves in the repository to a commit whose build is that release:
// its VERSION file (where it has one: v5 on) says the release, and its workflow code asks every
// gate of that release and the ones before it, and none of a later one.
func TestChangelogCommitsResolve(t *testing.T) {
	if _, err := os.Stat(".git"); errors.Is(err, os.ErrNotExist) {
		t.Skip("no .git: a source tree without its history (e.g. a tarball) cannot resolve CHANGELOG.md's commits")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("a git checkout, but no git to resolve CHANGELOG.md's commits with: %v", err)
	}
	if out, err := exec.Command("git", "rev-parse", "--is-shallow-repository").Output(); err == nil && strings.TrimSpace(string(out)) == "true" {
		t.Skip("a shallow clone holds no release's commit: fetch the history (git fetch --unshallow) to check them")
	}
	for _, s := range readChangelog(t).releases {
		if s.commit == "" {
			continue // TestChangelogDescribesTheRelease reports it
		}
		if out, err := exec.Command("git", "cat-file", "-e", s.commit+"^{commit}").CombinedOutput(); err != nil {
			t.Errorf("## %s: Commit %s does not resolve in the repository (git cat-file: %v: %s); in a shallow clone, fetch the history", s.release, s.commit, err, strings.TrimSpace(string(out)))
			continue
		}
		if v, err := exec.Command("git", "show", s.commit+":VERSION").Output(); err == nil && strings.TrimSpace(string(v)) != s.release {
			t.Errorf("## %s: its commit %s has VERSION %q", s.release, s.commit, strings.TrimSpace(string(v)))
		}
		checkGatesAt(t, s)
	}
}

// checkGatesAt checks that a release's commit holds, in its workflow code (tests aside), the
// id of every gate workflows.Changes gives to that release or an earlier one, and no id of a
// gate of a later release. Ids, not constant names: an id never changes once histories hold it.
func checkGatesAt(t *testing.T, s releaseSection) {
	t.Helper()
	args := []string{"grep", "-h", "-o", "-F"}
	for _, c := range workflows.Changes {
		args = append(args, "-e", strconv.Quote(c.ID))
	}
	args = append(args, s.commit, "--", "workflows/*.go", ":!workflows/*_test.go")
	out, err := exec.Command("git", args...).Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: nothing found
		t.Errorf("## %s: git grep at %s: %v", s.release, s.commit, err)
		return
	}
	asked := map[string]bool{}
	for _, q := range strings.Fields(string(out)) {
		if id, err := strconv.Unquote(q); err == nil {
			asked[id] = true
		}
	}
	release := number(t, s.release)
	for _, c := range workflows.Changes {
		switch of := number(t, c.Release); {
		case of <= release && !asked[c.ID]:
			t.Errorf("## %s: its commit %s does not ask gate %s (%s)", s.release, s.commit, c.ID, c.Release)
		case of > release && asked[c.ID]:
			t.Errorf("## %s: its commit %s already asks gate %s of %s", s.release, s.commit, c.ID, c.Release)
		}
	}
}
