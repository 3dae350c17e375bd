package activities

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerflow/runnerflow/internal/runnerpod"
	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// scaleSetEnv is a test's world with the scale-set activities wired to the double's Actions
// service through the official client.
type scaleSetEnv struct {
	*env
	ssa *ScaleSetActivities
}

func newScaleSetEnv(t *testing.T, cfg githubdouble.Config) *scaleSetEnv {
	t.Helper()
	e := newEnv(t)
	if cfg.ScaleSetPollWait == 0 {
		cfg.ScaleSetPollWait = 100 * time.Millisecond
	}
	cfg.Tokens = []string{testToken}
	gh, err := githubdouble.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gh.Close)
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	e.gh = gh
	clients, err := NewScaleSetClients(ScaleSetConfig{BaseURL: gh.URL(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	return &scaleSetEnv{env: e, ssa: &ScaleSetActivities{
		Clients: clients, Kube: e.kube, Sessions: NewScaleSetSessions(), ListenerQueue: workflows.ScaleSetListenerTaskQueue("w1"),
	}}
}

func (e *scaleSetEnv) ensure(name string, labels ...string) workflows.EnsureScaleSetOutput {
	e.t.Helper()
	out, err := e.ssa.EnsureScaleSet(e.ctx, workflows.EnsureScaleSetInput{Scope: acme, Name: name, Labels: labels})
	if err != nil {
		e.t.Fatalf("EnsureScaleSet: %v", err)
	}
	return out
}

func (e *scaleSetEnv) runnerInput(set int64, name string) workflows.CreateScaleSetRunnerInput {
	return workflows.CreateScaleSetRunnerInput{
		Pool: "ss", Name: name, WorkflowID: workflows.RunnerWorkflowID("ss", name), Namespace: e.ns,
		Scope: acme, ScaleSetID: set,
	}
}

func TestEnsureScaleSetCreatesAdoptsAndUpdates(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	first := e.ensure("linux-set", "linux", "x64")
	if !first.Created || first.ScaleSetID == 0 {
		t.Fatalf("first = %+v, want a created set", first)
	}
	again := e.ensure("linux-set", "X64", "linux")
	if again.Created || again.Updated || again.ScaleSetID != first.ScaleSetID {
		t.Errorf("again = %+v, want the same set adopted unchanged", again)
	}
	changed := e.ensure("linux-set", "linux", "arm64")
	if !changed.Updated || changed.ScaleSetID != first.ScaleSetID {
		t.Errorf("changed = %+v, want the set updated", changed)
	}
	if sets := e.gh.ScaleSets(); len(sets) != 1 || strings.Join(sets[0].Labels, ",") != "linux,arm64" {
		t.Errorf("sets at the double = %+v", sets)
	}
	if n := e.gh.CallCount("POST /orgs/{org}/actions/runners/registration-token"); n != 1 {
		t.Errorf("registration tokens = %d, want 1 (the admin token is cached)", n)
	}
}

// A service that keeps only a set's name as its label (GHES without custom scale-set labels)
// is told apart: the set is reported name-only, on create and on update alike, while a set
// whose only label is its name is not.
func TestEnsureScaleSetReportsAServiceThatKeepsOnlyTheName(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{ScaleSetNameOnlyLabelsFor: githubdouble.ScaleSetsMatching(githubdouble.ScaleSetKey{
		Scope: githubdouble.OrgScope("acme"), Name: "ghes-set"})})
	created := e.ensure("ghes-set", "linux", "x64", "gpu")
	if !created.Created || !created.NameOnlyLabels {
		t.Errorf("created = %+v, want the set reported name-only", created)
	}
	updated := e.ensure("ghes-set", "linux", "arm64")
	if !updated.Updated || !updated.NameOnlyLabels {
		t.Errorf("updated = %+v, want the set updated and reported name-only", updated)
	}
	if named := e.ensure("ghes-set", "ghes-set"); named.NameOnlyLabels || named.Updated {
		t.Errorf("a set labelled only by its name, as its spec says = %+v, want it adopted as it is", named)
	}
	if three := e.ensure("three", "linux", "x64", "gpu"); three.NameOnlyLabels {
		t.Errorf("a set of a service that keeps labels = %+v, want its three labels kept", three)
	}
	for _, set := range e.gh.ScaleSets() {
		if set.Name == "three" && len(set.Labels) != 3 {
			t.Errorf("set three has labels %v, want three", set.Labels)
		}
	}
}

func TestEnsureScaleSetInAMissingRunnerGroupIsNotFound(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	_, err := e.ssa.EnsureScaleSet(e.ctx, workflows.EnsureScaleSetInput{Scope: acme, RunnerGroup: "nope", Name: "s", Labels: []string{"s"}})
	if errType(err) != workflows.ErrNotFound {
		t.Errorf("err = %v (%s), want NotFound", err, errType(err))
	}
}

func TestDeleteScaleSetTwice(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	set := e.ensure("doomed", "doomed")
	in := workflows.DeleteScaleSetInput{Scope: acme, ScaleSetID: set.ScaleSetID}
	if out, err := e.ssa.DeleteScaleSet(e.ctx, in); err != nil || !out.Deleted {
		t.Fatalf("DeleteScaleSet = %+v, %v", out, err)
	}
	if out, err := e.ssa.DeleteScaleSet(e.ctx, in); err != nil || out.Deleted {
		t.Errorf("second DeleteScaleSet = %+v, %v; want done already", out, err)
	}
}

func TestCreateScaleSetRunnerWritesTheCredentialOnlyToTheSecret(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	set := e.ensure("jit-set", "jit")
	in := e.runnerInput(set.ScaleSetID, "ss-1")
	out, err := e.ssa.CreateScaleSetRunner(e.ctx, in)
	if err != nil || out.RunnerID == 0 || out.SecretName != in.Name {
		t.Fatalf("CreateScaleSetRunner = %+v, %v", out, err)
	}
	raw, _ := json.Marshal(out)
	e.mustNotLeak("the activity result", string(raw))
	secret, err := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(secret.Data[runnerpod.SecretKeyJITConfig])
	sess, err := githubdouble.NewRunnerClient(e.gh.URL()).ConnectJIT(e.ctx, cfg)
	if err != nil || sess.RunnerID != out.RunnerID {
		t.Fatalf("the runner could not connect with its Secret's configuration: %+v, %v", sess, err)
	}
	again, err := e.ssa.CreateScaleSetRunner(e.ctx, in)
	if err != nil || !again.Adopted || again.RunnerID != out.RunnerID {
		t.Errorf("retry = %+v, %v; want the first runner adopted", again, err)
	}
	if n := e.gh.TotalCalls(); n != 2 {
		t.Errorf("REST calls = %d (%v), want 2: the registration token and the admin connection", n, e.gh.Calls())
	}
}

// TestCreateScaleSetRunnerClearsItsOwnLeftover: a registration whose Secret was never written
// (the worker died between) is removed by the retry, and the next attempt mints a new one.
func TestCreateScaleSetRunnerClearsItsOwnLeftover(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	set := e.ensure("leftover", "leftover")
	in := e.runnerInput(set.ScaleSetID, "ss-2")
	first, err := e.ssa.CreateScaleSetRunner(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.kube.CoreV1().Secrets(e.ns).Delete(e.ctx, in.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ssa.CreateScaleSetRunner(e.ctx, in); errType(err) != workflows.ErrTransient {
		t.Fatalf("retry without a Secret: %v, want a Transient error after removing the leftover", err)
	}
	third, err := e.ssa.CreateScaleSetRunner(e.ctx, in)
	if err != nil || third.RunnerID == first.RunnerID {
		t.Errorf("third attempt = %+v, %v; want a new runner", third, err)
	}
}

func TestRemoveScaleSetRunnerRefusesABusyRunner(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	set := e.ensure("busy-set", "busy")
	out, err := e.ssa.CreateScaleSetRunner(e.ctx, e.runnerInput(set.ScaleSetID, "ss-3"))
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := e.kube.CoreV1().Secrets(e.ns).Get(e.ctx, "ss-3", metav1.GetOptions{})
	rc := githubdouble.NewRunnerClient(e.gh.URL())
	sess, err := rc.ConnectJIT(e.ctx, string(secret.Data[runnerpod.SecretKeyJITConfig]))
	if err != nil {
		t.Fatal(err)
	}
	job, _ := e.gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"busy"}})
	if got, err := rc.AcquireJob(e.ctx, sess, time.Second); err != nil || got == nil {
		t.Fatalf("AcquireJob = %+v, %v", got, err)
	}
	rm := workflows.RemoveScaleSetRunnerInput{Scope: acme, RunnerID: out.RunnerID}
	if _, err := e.ssa.RemoveScaleSetRunner(e.ctx, rm); errType(err) != workflows.ErrRunnerBusy {
		t.Fatalf("removing a busy runner: %v, want RunnerBusy", err)
	}
	if err := rc.CompleteJob(e.ctx, sess, job.ID, githubdouble.ConclusionSuccess); err != nil {
		t.Fatal(err)
	}
	if res, err := e.ssa.RemoveScaleSetRunner(e.ctx, rm); err != nil || res.Removed {
		t.Errorf("after the job = %+v, %v; want removed already (ephemeral)", res, err)
	}
}

// Whether the service answers the removal of a runner already gone with 404 or with 204 is not
// public (githubdouble.Config.ScaleSetRemovalOfGoneRunners); either way the removal succeeds,
// by id and by name, and nothing is retried.
func TestRemoveScaleSetRunnerAlreadyGoneSucceedsWhateverTheAnswer(t *testing.T) {
	for _, answers204 := range []bool{false, true} {
		t.Run(fmt.Sprintf("204 for a gone runner: %v", answers204), func(t *testing.T) {
			e := newScaleSetEnv(t, githubdouble.Config{ScaleSetRemovalOfGoneRunners: answers204})
			set := e.ensure("gone-set", "gone")
			out, err := e.ssa.CreateScaleSetRunner(e.ctx, e.runnerInput(set.ScaleSetID, "ss-gone-1"))
			if err != nil {
				t.Fatal(err)
			}
			byID := workflows.RemoveScaleSetRunnerInput{Scope: acme, RunnerID: out.RunnerID}
			if res, err := e.ssa.RemoveScaleSetRunner(e.ctx, byID); err != nil || !res.Removed {
				t.Fatalf("first removal = %+v, %v; want removed", res, err)
			}
			if _, err := e.ssa.RemoveScaleSetRunner(e.ctx, byID); err != nil {
				t.Errorf("removal by id of a runner already gone: %v, want success", err)
			}
			byName := workflows.RemoveScaleSetRunnerInput{Scope: acme, Name: "ss-gone-1", ScaleSetID: set.ScaleSetID}
			if _, err := e.ssa.RemoveScaleSetRunner(e.ctx, byName); err != nil {
				t.Errorf("removal by name of a runner already gone: %v, want success", err)
			}
		})
	}
}

// A runner whose id never reached its workflow is removed by its name, only from its own set;
// none of that name is removed already.
func TestRemoveScaleSetRunnerByName(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	set := e.ensure("named-set", "named")
	other := e.ensure("other-set", "other")
	out, err := e.ssa.CreateScaleSetRunner(e.ctx, e.runnerInput(set.ScaleSetID, "ss-4"))
	if err != nil {
		t.Fatal(err)
	}
	byName := func(setID int64) workflows.RemoveScaleSetRunnerInput {
		return workflows.RemoveScaleSetRunnerInput{Scope: acme, Name: "ss-4", ScaleSetID: setID}
	}
	if res, err := e.ssa.RemoveScaleSetRunner(e.ctx, byName(other.ScaleSetID)); err != nil || res.Removed {
		t.Fatalf("by name in another set = %+v, %v; want nothing removed", res, err)
	}
	if res, err := e.ssa.RemoveScaleSetRunner(e.ctx, byName(set.ScaleSetID)); err != nil || !res.Removed {
		t.Fatalf("by name in its set = %+v, %v; want runner %d removed", res, err, out.RunnerID)
	}
	if res, err := e.ssa.RemoveScaleSetRunner(e.ctx, byName(set.ScaleSetID)); err != nil || res.Removed {
		t.Errorf("by name once gone = %+v, %v; want removed already", res, err)
	}
	if _, err := e.ssa.RemoveScaleSetRunner(e.ctx, workflows.RemoveScaleSetRunnerInput{Scope: acme}); errType(err) != workflows.ErrInvalidSpec {
		t.Errorf("neither id nor name: %v, want %s", err, workflows.ErrInvalidSpec)
	}
}

func TestClassifyActionsServiceAnswers(t *testing.T) {
	e := newScaleSetEnv(t, githubdouble.Config{})
	set := e.ensure("faults", "faults")
	e.gh.SetActionsServiceThrottle(1)
	e.ensure("faults", "faults") // the minute's one call
	_, err := e.ssa.EnsureScaleSet(e.ctx, workflows.EnsureScaleSetInput{Scope: acme, Name: "faults", Labels: []string{"faults"}})
	if errType(err) != workflows.ErrRateLimited || nextRetryDelay(err) < 50*time.Second {
		t.Errorf("throttled: %v (%s, retry in %s), want RateLimited with the minute's rest", err, errType(err), nextRetryDelay(err))
	}
	e.gh.SetActionsServiceThrottle(0)
	e.gh.StartActionsServiceOutage(http.StatusBadGateway)
	if _, err := e.ssa.EnsureScaleSet(e.ctx, workflows.EnsureScaleSetInput{Scope: acme, Name: "faults", Labels: []string{"faults"}}); errType(err) != workflows.ErrTransient {
		t.Errorf("outage: %v, want Transient", err)
	}
	e.gh.EndActionsServiceOutage()
	e.gh.DeleteScaleSet(set.ScaleSetID)
	_, err = e.ssa.CreateScaleSetRunner(e.ctx, e.runnerInput(set.ScaleSetID, "ss-gone"))
	if errType(err) != workflows.ErrScaleSetGone {
		t.Errorf("runner of a deleted set: %v, want ScaleSetGone", err)
	}
	e.mustNotLeak("an Actions service error", err.Error())
}

func TestScaleSetClientFetchesAFreshAdminTokenAfter401(t *testing.T) {
	clock := &testClock{t: time.Now()}
	e := newScaleSetEnv(t, githubdouble.Config{Now: clock.Now})
	e.ensure("tokens", "tokens")
	clock.Advance(2 * time.Hour) // the double's admin token expired; the client's clock says not
	_, err := e.ssa.EnsureScaleSet(e.ctx, workflows.EnsureScaleSetInput{Scope: acme, Name: "tokens", Labels: []string{"tokens"}})
	if errType(err) != workflows.ErrTransient {
		t.Fatalf("with a refused admin token: %v, want Transient", err)
	}
	if out, err := e.ssa.EnsureScaleSet(e.ctx, workflows.EnsureScaleSetInput{Scope: acme, Name: "tokens", Labels: []string{"tokens"}}); err != nil || out.Created {
		t.Errorf("the retry = %+v, %v; want the set found with a fresh admin token", out, err)
	}
}
