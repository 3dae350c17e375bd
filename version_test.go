package runnerflow

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The release in VERSION is the newest section of CHANGELOG.md, and every section names its
// commit.
func TestChangelogDescribesTheRelease(t *testing.T) {
	if !regexp.MustCompile(`^v[0-9]+$`).MatchString(Version()) {
		t.Fatalf("VERSION holds %q, want v<N>", Version())
	}
	raw, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := regexp.MustCompile(`(?m)^## (v[0-9]+)\n+Commit: (\S+)`).FindAllStringSubmatch(string(raw), -1)
	if len(sections) == 0 || sections[0][1] != Version() {
		t.Fatalf("CHANGELOG.md's newest release section is %v, want ## %s first", sections, Version())
	}
	if n := strings.Count(string(raw), "\n## v"); n != len(sections) {
		t.Errorf("%d release sections, %d of them name their commit", n, len(sections))
	}
}
