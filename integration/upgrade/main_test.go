//go:build upgradecheck

// Package upgrade rehearses a deploy in the local test world: an earlier release's worker and
// starter run pools (one at rest, one taking a burst), the worker is stopped mid-burst and this
// tree's worker and starter take over on the same Temporal server. Every job must run once and
// no history may meet a non-determinism error. `make upgrade-check FROM=<release>` builds the
// earlier release from the repository's history and runs it (the build tag keeps it out of
// make test: it takes several minutes).
package upgrade

import (
	"os"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/localworld/testworld"
)

var world *testworld.World

// webhookSecret signs the double's deliveries; both releases' intakes are given it.
const webhookSecret = "upgrade-check"

func TestMain(m *testing.M) {
	os.Exit(testworld.RunTests(m, testworld.WorldOptions{WorkDuration: time.Second, WebhookSecret: webhookSecret}, &world))
}
