package testworld_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/localworld/simulator"
	"github.com/runnerflow/runnerflow/localworld/testworld"
)

const arcScaleSetToken = "ghp_arcscaleset000000000000000000000000000"

// TestARCScaleSetRunsJobsOnItsPods runs ARC's scale-set mode as released (gha-runner-scale-set
// ARCScaleSetVersion) against the double (sets served as github.com serves them) and the simulator,
// which runs ARC's listener process for the listener pod ARC creates: every job queued for the
// set runs on a pod of an EphemeralRunner ARC created.
func TestARCScaleSetRunsJobsOnItsPods(t *testing.T) {
	if err := testworld.ARCScaleSetTools(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "arc-scaleset"
	dir := t.TempDir()
	k, err := testworld.StartKubeWith(ctx, testworld.KubeOptions{Dir: dir + "/kube", Users: append(testworld.ARCUsers(), testworld.GarbageCollectorUser)})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	if err := testworld.InstallARCScaleSetCRDs(ctx, k.Config); err != nil {
		t.Fatal(err)
	}
	if err := k.StartGarbageCollector(ctx); err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(k.Config)
	dyn := dynamic.NewForConfigOrDie(k.Config)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gh, err := githubdouble.Start(githubdouble.Config{Tokens: []string{arcScaleSetToken}, ScaleSetRemovalOfGoneRunners: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gh.Close()
	if err := gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/app"}); err != nil {
		t.Fatal(err)
	}
	host, port, ca := k.InClusterEndpoint()
	listener, err := testworld.ToolPath(testworld.ARCScaleSetListenerTool)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sim := simulator.New(simulator.Config{
		Client: client, Namespaces: []string{ns}, GitHub: githubdouble.NewRunnerClient(gh.URL()),
		WorkDuration: time.Second, Logger: logger,
		ARCListener: &simulator.ARCListener{Binary: listener, APIServerHost: host, APIServerPort: port, CA: ca, Dir: dir + "/listeners"},
	})
	simCtx, stopSim := context.WithCancel(ctx)
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Run(simCtx) }()
	defer func() { stopSim(); <-simDone }()

	// The limits the bench's tuned peer raises, so its flags are known to start the manager.
	arc, err := testworld.StartARCScaleSet(ctx, testworld.ARCScaleSetOptions{Kube: k, Namespace: ns, Dir: dir + "/arc",
		RunnerMaxConcurrentReconciles: 20, KubeQPS: 100, KubeBurst: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer arc.Stop()
	if !regexp.MustCompile(`"runner-max-concurrent-reconciles":\s*20\b`).MatchString(arc.LogTail()) {
		t.Errorf("ARC's manager did not take the raised concurrency:\n%s", arc.LogTail())
	}
	if err := testworld.CreateARCScaleSet(ctx, client, dyn, testworld.ARCScaleSetSpec{
		Namespace: ns, Name: "arc-linux", ConfigURL: gh.URL() + "acme", Token: arcScaleSetToken, MaxRunners: 10,
		Labels: []string{"linux", "x64"},
	}); err != nil {
		t.Fatal(err)
	}
	const jobs = 3
	var ids []int64
	// A job reaches the set by its name or by its other labels.
	runsOn := [][]string{{"arc-linux"}, {"self-hosted", "linux", "x64"}, {"linux"}}
	for i := range jobs {
		j, err := gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: runsOn[i]})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		j := waitJobDone(ctx, t, gh, id, arc, dir+"/listeners")
		if j.Conclusion != githubdouble.ConclusionSuccess {
			t.Errorf("job %d concluded %q", id, j.Conclusion)
		}
		if !createdByARC(ctx, t, dyn, ns, j.RunnerName) {
			t.Errorf("job %d ran on %q, not an EphemeralRunner's pod", id, j.RunnerName)
		}
	}
}

// waitJobDone polls the double until the job completed.
func waitJobDone(ctx context.Context, t *testing.T, gh *githubdouble.Server, id int64, arc *testworld.ARCScaleSet, listeners string) githubdouble.Job {
	t.Helper()
	for {
		if j, _ := gh.Job(id); j.Status == githubdouble.StatusCompleted {
			return j
		}
		select {
		case <-ctx.Done():
			logs, _ := filepath.Glob(filepath.Join(listeners, "*", "listener.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("--- %s ---\n%s", l, b[max(0, len(b)-6000):])
			}
			t.Fatalf("job %d did not complete: %v\n%s", id, ctx.Err(), arc.LogTail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createdByARC reports whether runnerName is the name of an EphemeralRunner of the set's
// EphemeralRunnerSet: ARC names the runner, its JIT registration and its pod alike
// ("<runner set>-runner-<suffix>"), and only ARC holds the set's admin credential here.
func createdByARC(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, runnerName string) bool {
	t.Helper()
	sets, err := dyn.Resource(testworld.ARCScaleSetGroupVersion.WithResource("ephemeralrunnersets")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range sets.Items {
		if strings.HasPrefix(runnerName, set.GetName()+"-runner-") {
			return true
		}
	}
	return false
}
