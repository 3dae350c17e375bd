package runnerflow

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var release string

// Version is this build's release: the VERSION file, which a release commit bumps and
// CHANGELOG.md describes. Embedded, so every build of the tree knows it.
func Version() string { return strings.TrimSpace(release) }
