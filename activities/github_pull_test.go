package activities

import (
	"slices"
	"testing"

	"github.com/runnerflow/runnerflow/localworld/githubdouble"
	"github.com/runnerflow/runnerflow/workflows"
)

// jobsOf lists the ids of the jobs in a pull's answers.
func jobsOf(repos []workflows.PulledRepo) []int64 {
	var ids []int64
	for _, r := range repos {
		for _, run := range r.Runs {
			for _, j := range run.AllJobs() {
				ids = append(ids, j.ID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// etagsOnly is what a pool sends back: its last answers without their jobs.
func etagsOnly(repos []workflows.PulledRepo) []workflows.PulledRepo {
	out := slices.Clone(repos)
	for i := range out {
		out[i].Runs = slices.Clone(out[i].Runs)
		for j := range out[i].Runs {
			out[i].Runs[j].Jobs = nil
			out[i].Runs[j].More = slices.Clone(out[i].Runs[j].More)
			for k := range out[i].Runs[j].More {
				out[i].Runs[j].More[k].Jobs = nil
			}
		}
	}
	return out
}

// PullJobs reads the queued jobs the labels fit through the real go-github client, and a
// second read with the answers' ETags is all 304s; once a job changes, only what changed is
// read again.
func TestPullJobsReadsConditionally(t *testing.T) {
	e := newEnv(t)
	var fit []int64
	for _, labels := range [][]string{{"self-hosted", "linux"}, {"self-hosted", "linux"}, {"self-hosted", "gpu"}} {
		j, err := e.gh.QueueJob(githubdouble.JobSpec{Repository: "acme/app", Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		if labels[1] == "linux" {
			fit = append(fit, j.ID)
		}
	}
	in := workflows.PullJobsInput{Pool: "pool-a", Labels: []string{"self-hosted", "linux"}, Repos: []string{"acme/app"}}
	first, err := e.gha.PullJobs(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// Two listings (queued, in progress) and one listing per queued run.
	if got := jobsOf(first.Repos); !slices.Equal(got, fit) || first.Calls != 5 || first.NotModified != 0 {
		t.Fatalf("first read: jobs %v in %d calls (%d 304); want %v in 5 calls", got, first.Calls, first.NotModified, fit)
	}

	in.Last = etagsOnly(first.Repos)
	again, err := e.gha.PullJobs(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if again.Calls != 5 || again.NotModified != 5 {
		t.Fatalf("read with the ETags: %d calls, %d answered 304; want all 5 answered 304", again.Calls, again.NotModified)
	}
	for _, run := range again.Repos[0].Runs {
		if !run.NotModified || len(run.Jobs) != 0 {
			t.Errorf("run %d after a 304: %+v, want NotModified with no jobs", run.RunID, run)
		}
	}

	if err := e.gh.CancelJob(fit[0]); err != nil {
		t.Fatal(err)
	}
	in.Last = etagsOnly(first.Repos)
	third, err := e.gha.PullJobs(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// The queued listing changed (one run fewer); the in-progress listing and the remaining
	// runs did not.
	if third.Calls != 4 || third.NotModified != 3 {
		t.Errorf("read after a cancel: %d calls, %d answered 304; want 4 and 3", third.Calls, third.NotModified)
	}
}

// A repository GitHub does not know is NotFound, not retried.
func TestPullJobsUnknownRepository(t *testing.T) {
	e := newEnv(t)
	_, err := e.gha.PullJobs(e.ctx, workflows.PullJobsInput{Pool: "pool-a", Labels: []string{"linux"}, Repos: []string{"acme/nope"}})
	if errType(err) != workflows.ErrNotFound {
		t.Fatalf("PullJobs of an unknown repository: %v (type %q), want %s", err, errType(err), workflows.ErrNotFound)
	}
}

// A read lists the jobs of at most PullJobListingsPerRead runs; the next read takes the runs
// the last one had no room for first, and keeps the last answer of those it has no room for.
func TestPullJobsBoundsJobListingsPerRead(t *testing.T) {
	e := newEnv(t)
	if err := e.gh.AddRepository(githubdouble.RepositorySpec{FullName: "acme/lib"}); err != nil {
		t.Fatal(err)
	}
	per := workflows.PullJobListingsPerRead*3/5 + 1 // two repositories' runs exceed one read
	for _, repo := range []string{"acme/app", "acme/lib"} {
		for range per {
			if _, err := e.gh.QueueJob(githubdouble.JobSpec{Repository: repo, Labels: []string{"linux"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	in := workflows.PullJobsInput{Pool: "pool-a", Labels: []string{"linux"}, Repos: []string{"acme/app", "acme/lib"}}
	first, err := e.gha.PullJobs(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	limit := workflows.PullJobListingsPerRead
	if got := len(jobsOf(first.Repos)); got != limit || first.Calls != 4+limit {
		t.Fatalf("first read: %d jobs in %d calls; want %d in %d", got, first.Calls, limit, 4+limit)
	}
	in.Last = etagsOnly(first.Repos)
	second, err := e.gha.PullJobs(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	unread := 0
	for _, r := range first.Repos {
		for _, run := range r.Runs {
			if run.Unread {
				unread++
			}
		}
	}
	if unread != 2*per-limit {
		t.Errorf("first read: %d runs unread, want the %d it had no room for", unread, 2*per-limit)
	}
	read, kept := 0, 0
	for _, r := range second.Repos {
		for _, run := range r.Runs {
			switch {
			case !run.NotModified && len(run.Jobs) == 1:
				read++
			case run.NotModified:
				kept++
			}
		}
	}
	// The runs left out are read now; of the others, what room is left is asked (304s) and the
	// rest keep their last answer without a call.
	if second.Calls != 4+limit || read != 2*per-limit || kept != limit {
		t.Fatalf("second read: %d calls, %d runs read anew, %d kept; want %d calls, %d read, %d kept",
			second.Calls, read, kept, 4+limit, 2*per-limit, limit)
	}
}

// A matrix of 150 jobs is one run with two pages of jobs. Once its first 100 jobs are done,
// the 50 still queued are all on the second page: the pull reads every page of the run (it
// read the first only, and a pull-only pool saw nothing waiting and scaled down while 50 jobs
// stayed queued). A read with the ETags is then a 304 for every page.
func TestPullJobsReadsEveryPageOfARun(t *testing.T) {
	e := newEnv(t)
	matrix, err := e.gh.QueueMatrix(githubdouble.JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "linux"}}, 150)
	if err != nil {
		t.Fatal(err)
	}
	var waiting []int64
	for i, j := range matrix {
		if i < 100 {
			if err := e.gh.CancelJob(j.ID); err != nil {
				t.Fatal(err)
			}
			continue
		}
		waiting = append(waiting, j.ID)
	}
	in := workflows.PullJobsInput{Pool: "pool-a", Labels: []string{"self-hosted", "linux"}, Repos: []string{"acme/app"}}
	first, err := e.gha.PullJobs(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// Two runs listings (the run is in progress), then the run's two pages.
	if got := jobsOf(first.Repos); !slices.Equal(got, waiting) || first.Calls != 4 {
		t.Fatalf("first read: %d jobs in %d calls; want the %d queued jobs of the second page in 4 calls", len(got), first.Calls, len(waiting))
	}
	if run := first.Repos[0].Runs[0]; run.Unread || len(run.More) != 1 {
		t.Errorf("the run's answer %+v: want both pages, nothing unread", run)
	}
	in.Last = etagsOnly(first.Repos)
	again, err := e.gha.PullJobs(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if run := again.Repos[0].Runs[0]; again.Calls != 4 || again.NotModified != 4 || !run.NotModified || len(run.More) != 1 || !run.More[0].NotModified {
		t.Errorf("read with the ETags: %d calls, %d answered 304, run %+v; want every page answered 304", again.Calls, again.NotModified, run)
	}
}
