package poolcli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/runnerflow/runnerflow/workflows"
)

// The status a person reads shows the warm registrations only for a pool that keeps some.
func TestPrintStatusShowsWarmRegistrations(t *testing.T) {
	st := workflows.PoolStatus{Name: "linux", Warm: []workflows.WarmRegistration{{}, {}}, WarmReady: 1, WarmWanted: 3}
	var out bytes.Buffer
	printStatus(&out, st)
	if want := "warm        2 registration(s) minted ahead, 1 ready, 3 wanted"; !strings.Contains(out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	printStatus(&out, workflows.PoolStatus{Name: "cold"})
	if strings.Contains(out.String(), "warm") {
		t.Errorf("a pool without warm registrations shows them:\n%s", out.String())
	}
}
