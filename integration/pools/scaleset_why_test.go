package pools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/runnerflow/runnerflow/internal/poolcli"
	"github.com/runnerflow/runnerflow/workflows"
)

// TestWhyExplainsAJobWaitingOnAScaleSet: a scale-set pool of at most one runner runs a long
// job, and a second job queued behind it waits. `starter why` (its own code, against the
// world's Temporal) says the first runs on the pool's runner, and that the second waits on
// the set at its maximum, naming the set and what the job waits for, in JSON and in text.
func TestWhyExplainsAJobWaitingOnAScaleSet(t *testing.T) {
	p := newPoolTest(t, "ss-why")
	set := p.scaleSetPool(1, "10m")
	first := p.queueJobs(1)[0]
	p.eventually(wait, "the first job's runner busy", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerBusy, "") == 1
	})
	second := p.queueJobs(1)[0]

	var r poolcli.WhyReport
	waitFor(t, wait, "why says the first job runs", func() bool {
		r = p.whyJSON(first)
		return !r.Waiting && strings.HasPrefix(r.Detail, "running on "+p.name+"-")
	})
	named := fmt.Sprintf("scale set %q (id %d)", p.name, set.ID)
	waitFor(t, wait, "why says the second job waits on the set at its maximum", func() bool {
		r = p.whyJSON(second)
		return r.Cause == poolcli.CauseAtMax
	})
	if !r.Waiting || !strings.Contains(r.Detail, named) || !strings.Contains(r.Detail, "maximum") || !strings.Contains(r.Detail, "for one of them to end") {
		t.Errorf("why %d: %s, want it waiting on %s at its maximum for one of its jobs to end", second, r.Detail, named)
	}
	if len(r.Facts.ScaleSets) != 1 || r.Facts.ScaleSets[0].Set.ScaleSetID != set.ID || r.Facts.ScaleSets[0].Set.ListenerMax != 1 {
		t.Errorf("why %d: facts %+v, want the set, its maximum 1 reported", second, r.Facts.ScaleSets)
	}
	text := p.why(second)
	t.Logf("why %d:\n%s", second, text)
	for _, want := range []string{"Waiting: " + string(poolcli.CauseAtMax), named, "S" + named[1:] + " of pool " + p.name + ": listener running"} {
		if !strings.Contains(text, want) {
			t.Errorf("why %d (text) lacks %q:\n%s", second, want, text)
		}
	}
}

// why runs `starter why <job>` with the arguments given and returns what it printed.
func (p *poolTest) why(job int64, more ...string) string {
	p.t.Helper()
	args := append([]string{strconv.FormatInt(job, 10), "--temporal-address", world.Temporal.Address,
		"--namespace", world.Temporal.Namespace}, more...)
	var out bytes.Buffer
	if err := poolcli.RunWhy(context.Background(), args, &out); err != nil {
		p.t.Fatalf("why %d: %v", job, err)
	}
	return out.String()
}

func (p *poolTest) whyJSON(job int64) poolcli.WhyReport {
	p.t.Helper()
	out := p.why(job, "-o", "json")
	var r poolcli.WhyReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		p.t.Fatalf("why %d -o json does not decode (%v):\n%s", job, err, out)
	}
	return r
}
