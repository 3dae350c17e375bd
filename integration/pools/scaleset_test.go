package pools

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnerflow/runnerflow/internal/workerapp"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/testworld"
	"github.com/runnerflow/runnerflow/workflows"
)

// scaleSetPool applies a scale-set pool of at most maxR runners, with no webhook configured
// (a scale set needs none), and waits until its set exists at the double with its listener's
// session open.
func (p *poolTest) scaleSetPool(maxR int, work string) githubdouble.ScaleSet {
	p.t.Helper()
	world.GitHub.SetWebhookURL("")
	spec := p.spec(0, maxR, work)
	spec.ScaleSet = &workflows.ScaleSetSpec{}
	p.apply(spec.WithDefaults())
	return p.listenedTo()
}

// listenedTo waits until the pool's set exists at the double with its listener's session open,
// and ends the listener with the test.
func (p *poolTest) listenedTo() githubdouble.ScaleSet {
	p.t.Helper()
	st := p.eventually(wait, "the set created and listened to", func(st workflows.PoolStatus) bool {
		return st.ScaleSet != nil && st.ScaleSet.ScaleSetID != 0 && st.ScaleSet.Listening
	})
	// A listener outlives its pool by design; the test's ends with it, so later tests' workers
	// do not serve it.
	p.t.Cleanup(func() {
		_ = p.c.TerminateWorkflow(p.ctx, workflows.ScaleSetListenerWorkflowID(p.name, st.ScaleSet.ScaleSetID), "", "test over")
	})
	return p.sessionOpen(st.ScaleSet.ScaleSetID)
}

// refusedSessions is how many of the set's session opens the service refused (409).
func refusedSessions(id int64) int {
	for _, s := range world.GitHub.ScaleSets() {
		if s.ID == id {
			return s.RefusedSessions
		}
	}
	return 0
}

// sessionOpen waits until the double's set id has a message session open.
func (p *poolTest) sessionOpen(id int64) githubdouble.ScaleSet {
	p.t.Helper()
	var set githubdouble.ScaleSet
	waitFor(p.t, wait, "the listener's session open at the service", func() bool {
		for _, s := range world.GitHub.ScaleSets() {
			if s.ID == id && s.SessionID != "" {
				set = s
				return true
			}
		}
		return false
	})
	return set
}

// perRunnerRESTCalls lists the REST calls from index from on routes a runner's lifecycle would
// use (its JIT registration, a read or removal of one runner); a scale set's runners use none.
func perRunnerRESTCalls(from int) []string {
	var out []string
	for _, c := range world.GitHub.CallLog()[from:] {
		if strings.Contains(c.Route, "{runner_id}") || strings.Contains(c.Route, "generate-jitconfig") ||
			strings.Contains(c.Route, "remove-token") {
			out = append(out, c.Route)
		}
	}
	return out
}

// TestScaleSetPoolServesABurstWithoutRESTCallsPerRunner: a scale-set pool goes from zero to a
// runner per job and back to zero through a burst, every job run once on one of its runners,
// with no REST call for any runner (their configurations and removals go to the Actions
// service, through the official client).
func TestScaleSetPoolServesABurstWithoutRESTCallsPerRunner(t *testing.T) {
	p := newPoolTest(t, "ss-burst")
	began := time.Now()
	set := p.scaleSetPool(10, "2s")
	t.Logf("set %d listened to after %s", set.ID, time.Since(began).Round(100*time.Millisecond))
	if set.Name != p.name || set.MaxCapacity > 10 {
		t.Errorf("set %+v, want the pool's name and at most its maximum reported", set)
	}
	from := len(world.GitHub.CallLog())
	jit := world.GitHub.ActionsServiceCalls()

	ids := p.queueJobs(8)
	p.checkRanOnceEach(p.jobsDone(ids))
	t.Logf("jobs done after %s", time.Since(began).Round(100*time.Millisecond))
	st := p.eventually(wait, "back to zero", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0
	})
	minted := 0
	for k, n := range world.GitHub.ActionsServiceCalls() {
		if strings.Contains(k.Route, "generatejitconfig") && k.Status < 300 {
			minted += n - jit[k]
		}
	}
	t.Logf("%d jobs: %d runners started, %d JIT configurations from the set, last message %d, session %s",
		len(ids), st.Totals.Started, minted, st.ScaleSet.Ledger.LastMessageID, st.ScaleSet.SessionID)
	if st.Totals.Started < int64(len(ids)) || st.Totals.Started > int64(len(ids))+1 {
		t.Errorf("started %d runners for %d jobs, want one per job", st.Totals.Started, len(ids))
	}
	if minted != int(st.Totals.Started) {
		t.Errorf("%d JIT configurations minted at the set for %d runners", minted, st.Totals.Started)
	}
	if calls := perRunnerRESTCalls(from); len(calls) != 0 {
		t.Errorf("REST calls for runners: %q, want none", calls)
	}
	if st.ScaleSet.SessionID == "" || st.ScaleSet.Ledger.LastMessageID == 0 {
		t.Errorf("status %+v: want the session and last message shown", *st.ScaleSet)
	}
	listener := workflows.ScaleSetListenerWorkflowID(p.name, set.ID)
	for _, id := range []string{listener, workflows.PoolWorkflowID(p.name)} {
		b, err := testworld.HistoryBytes(p.ctx, p.c, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("jitconfig")) || bytes.Contains(b, []byte(world.GitHubToken)) {
			t.Errorf("%s's history holds a JIT configuration or the token", id)
		}
	}
	if testworld.RecordingHistories() {
		recordHistory(t, listener, "", "scaleset-listener-burst")
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-scaleset-burst")
	}
}

// TestScaleSetDeletedAtGitHubIsCreatedAgain: GitHub deletes the set (as it does one idle for
// about a week); the pool creates it again, its listener follows, and jobs run on its runners.
func TestScaleSetDeletedAtGitHubIsCreatedAgain(t *testing.T) {
	p := newPoolTest(t, "ss-gone")
	old := p.scaleSetPool(5, "2s")
	if !world.GitHub.DeleteScaleSet(old.ID) {
		t.Fatalf("the double has no set %d", old.ID)
	}
	st := p.eventually(wait, "the set created again and listened to", func(st workflows.PoolStatus) bool {
		return st.ScaleSet.ScaleSetID != old.ID && st.ScaleSet.ScaleSetID != 0 && st.ScaleSet.Listening && st.ScaleSet.Recreated == 1
	})
	p.sessionOpen(st.ScaleSet.ScaleSetID)
	ids := p.queueJobs(2)
	p.checkRanOnceEach(p.jobsDone(ids))
	p.eventually(wait, "back to zero", func(st workflows.PoolStatus) bool { return len(st.Runners) == 0 && st.Desired == 0 })
}

// acquisitions sums the successful job acquisitions the Actions service answered.
func acquisitions() int {
	n := 0
	for k, c := range world.GitHub.ActionsServiceCalls() {
		if strings.HasSuffix(k.Route, "/acquirejobs") && k.Status == http.StatusOK {
			n += c
		}
	}
	return n
}

// TestScaleSetOfferingSetServesABurst: on a service that offers jobs and assigns them only
// once the listener acquires them (GHES), a burst of 150 runs once each, with a runner per job
// and at most 2 % more (the lifecycles per job asked of a set of either flow). The burst is
// big enough that the jobs' assigned messages wait behind three messages of offers while the
// first jobs run and end: a pool that learned of its jobs only from those messages scaled on
// the statistics meanwhile, took the ended jobs off them twice, let go of runners the
// acquired jobs were about to take, and started others for them (178 to 185 runners).
func TestScaleSetOfferingSetServesABurst(t *testing.T) {
	const jobs = 150
	p := newPoolTest(t, "ss-offers")
	if p.org != offeringOrg {
		t.Fatalf("the pool's organization is %s, want the offering %s", p.org, offeringOrg)
	}
	p.scaleSetPool(jobs, "2s")
	acquired := acquisitions()
	ids := p.queueJobs(jobs)
	p.checkRanOnceEach(p.jobsDone(ids))
	st := p.eventually(wait, "back to zero", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0
	})
	t.Logf("%d jobs: %d runners started, %d acquisitions", len(ids), st.Totals.Started, acquisitions()-acquired)
	if acquisitions() == acquired {
		t.Errorf("no job was acquired: the set was not offered its jobs")
	}
	if st.Totals.Started < int64(len(ids)) || st.Totals.Started > int64(len(ids))*102/100 {
		t.Errorf("started %d runners for %d jobs, want one per job, at most 2 %% more", st.Totals.Started, len(ids))
	}
	if testworld.RecordingHistories() {
		// The offering flow's histories: the only ones that hand over and count acquired jobs.
		recordHistory(t, workflows.ScaleSetListenerWorkflowID(p.name, st.ScaleSet.ScaleSetID), "", "scaleset-listener-offered")
		recordHistory(t, workflows.PoolWorkflowID(p.name), "", "pool-scaleset-offered")
	}
}

// TestScaleSetListenerMovesOnADeploy: a rolling deploy mid-burst (the next worker started,
// then the one holding the set's message session stopped gracefully, jobs queued while it
// stops). The stopping worker closes its session and tells the listener while its listener
// queue is still served, so the listener opens its next session on the next worker at once,
// never refused, and not after a call left on the stopped worker's queue timed out; every job
// runs once, those queued during the deploy start well before the service would have let go
// of a session left open (half its session timeout: how soon they start is the soak's figure,
// not this test's), and the pool's cursor never goes back.
func TestScaleSetListenerMovesOnADeploy(t *testing.T) {
	p := newPoolTestWith(t, "ss-deploy", func(c *workerapp.Config) { c.Identity = "ss-deploy-a" })
	set := p.scaleSetPool(10, "20s")
	conflicts := refusedSessions(set.ID)
	ids := p.queueJobs(4)
	before := p.eventually(wait, "runners busy mid-burst", func(st workflows.PoolStatus) bool {
		return count(st, workflows.RunnerBusy, "") >= 2
	})
	p.startWorkerWith(func(c *workerapp.Config) { c.Identity = "ss-deploy-b" })
	stopping, stopped := time.Now(), make(chan time.Time)
	go func() {
		p.stopWorker()
		stopped <- time.Now()
	}()
	during := p.queueJobs(4) // while the first worker stops
	t.Logf("the first worker stopped %s after it was told to", (<-stopped).Sub(stopping).Round(100*time.Millisecond))
	waitFor(t, wait, "the set served through a new session", func() bool {
		i := slices.IndexFunc(world.GitHub.ScaleSets(), func(s githubdouble.ScaleSet) bool { return s.ID == set.ID })
		return i >= 0 && world.GitHub.ScaleSets()[i].SessionID != "" && world.GitHub.ScaleSets()[i].SessionID != before.ScaleSet.SessionID
	})
	t.Logf("the set had a new session %s after the first worker was told to stop", time.Since(stopping).Round(100*time.Millisecond))
	ids = append(ids, during...)

	var jobs []githubdouble.Job
	waitFor(t, 6*time.Minute, "every job completed", func() bool {
		jobs = jobs[:0]
		for _, id := range ids {
			j, ok := world.GitHub.Job(id)
			if !ok || j.Status != githubdouble.StatusCompleted {
				return false
			}
			jobs = append(jobs, j)
		}
		return true
	})
	p.checkRanOnceEach(jobs)
	for _, j := range jobs {
		if slices.Contains(during, j.ID) {
			waited := j.StartedAt.Sub(j.CreatedAt)
			t.Logf("job %d, queued during the deploy, started %s after it was queued", j.ID, waited.Round(100*time.Millisecond))
			if deaf := world.GitHub.ScaleSetSessionTimeout() / 2; waited > deaf {
				t.Errorf("job %d, queued during the deploy, started %s after it was queued, want well within the %s the service keeps a session left open",
					j.ID, waited.Round(time.Second), 2*deaf)
			}
		}
	}
	st := p.eventually(wait, "back to zero", func(st workflows.PoolStatus) bool {
		return len(st.Runners) == 0 && st.Desired == 0 && st.ScaleSet.Ledger.Jobs() == 0
	})
	t.Logf("%d jobs: %d runners started; last message %d before the deploy, %d at the end; session %s",
		len(ids), st.Totals.Started, before.ScaleSet.Ledger.LastMessageID, st.ScaleSet.Ledger.LastMessageID, st.ScaleSet.SessionID)
	if n := refusedSessions(set.ID) - conflicts; n != 0 {
		t.Errorf("%d session opens were refused (409) during the deploy, want none", n)
	}
	if st.Totals.Started < int64(len(ids)) || st.Totals.Started > int64(len(ids))+1 {
		t.Errorf("started %d runners for %d jobs, want one per job", st.Totals.Started, len(ids))
	}
	if st.ScaleSet.Ledger.LastMessageID < before.ScaleSet.Ledger.LastMessageID || st.ScaleSet.SessionID == before.ScaleSet.SessionID {
		t.Errorf("cursor %d → %d, session %s → %s: want the cursor kept and a new session",
			before.ScaleSet.Ledger.LastMessageID, st.ScaleSet.Ledger.LastMessageID, before.ScaleSet.SessionID, st.ScaleSet.SessionID)
	}
}

// TestScaleSetRenamedUnderABusyRunner: the pool is moved to a set of another name while a
// runner of the old set runs a job. The job completes where it runs; the old set is deleted
// only after its runner ended, and the new set serves the next job.
func TestScaleSetRenamedUnderABusyRunner(t *testing.T) {
	p := newPoolTest(t, "ss-rename")
	old := p.scaleSetPool(3, "15s")
	busy := p.queueJobs(1)
	waitFor(t, wait, "the job running on the old set's runner", func() bool {
		j, _ := world.GitHub.Job(busy[0])
		return j.Status == githubdouble.StatusInProgress
	})
	spec := p.spec(0, 3, "1s")
	spec.ScaleSet = &workflows.ScaleSetSpec{Name: p.name + "-next"}
	p.apply(spec.WithDefaults())
	st := p.eventually(wait, "on the new set, the old one kept while its runner runs", func(st workflows.PoolStatus) bool {
		return st.ScaleSet.ScaleSetID != old.ID && st.ScaleSet.Listening && len(st.ScaleSet.Left) == 1
	})
	if !setExists(old.ID) {
		t.Fatalf("set %d deleted while its runner ran a job", old.ID)
	}
	p.checkRanOnceEach(p.jobsDone(busy))
	p.eventually(wait, "the old set deleted after its runner", func(st workflows.PoolStatus) bool {
		return len(st.ScaleSet.Left) == 0 && !setExists(old.ID)
	})
	p.sessionOpen(st.ScaleSet.ScaleSetID)
	p.checkRanOnceEach(p.jobsDone(p.queueJobs(1)))
}

func setExists(id int64) bool {
	return slices.ContainsFunc(world.GitHub.ScaleSets(), func(s githubdouble.ScaleSet) bool { return s.ID == id })
}

// TestScaleSetLabels: a set carries its pool's three labels; on a GHES that keeps only a set's
// name as its label, the pool reports it in its status (which starter get prints).
func TestScaleSetLabels(t *testing.T) {
	p := newPoolTest(t, "ss-labels")
	spec := p.spec(0, 2, "1s")
	spec.Labels = []string{"self-hosted", "linux", "gpu"}
	spec.ScaleSet = &workflows.ScaleSetSpec{}
	world.GitHub.SetWebhookURL("")
	p.apply(spec.WithDefaults())
	st := p.eventually(wait, "the set created", func(st workflows.PoolStatus) bool { return st.ScaleSet != nil && st.ScaleSet.ScaleSetID != 0 })
	set := p.sessionOpen(st.ScaleSet.ScaleSetID)
	if len(set.Labels) != 3 || st.ScaleSet.NameOnlyLabels {
		t.Errorf("set labels %v, name-only %v; want the pool's three labels kept", set.Labels, st.ScaleSet.NameOnlyLabels)
	}

	q := newPoolTest(t, "ss-name-only")
	if q.org != nameOnlyOrg {
		t.Fatalf("organization %s, want %s", q.org, nameOnlyOrg)
	}
	spec = q.spec(0, 2, "1s")
	spec.Labels = []string{"self-hosted", "linux", "gpu"}
	spec.ScaleSet = &workflows.ScaleSetSpec{}
	q.apply(spec.WithDefaults())
	st = q.eventually(wait, "the set created, reported name-only", func(st workflows.PoolStatus) bool {
		return st.ScaleSet != nil && st.ScaleSet.ScaleSetID != 0 && st.ScaleSet.NameOnlyLabels
	})
	set = q.sessionOpen(st.ScaleSet.ScaleSetID)
	if len(set.Labels) != 1 || !strings.EqualFold(set.Labels[0], q.name) {
		t.Errorf("set labels %v, want only its name", set.Labels)
	}
}
