package workflows

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Wire types of prewarming (issue 39): the job graph of a workflow run as the pool keeps it,
// what the pool has seen of the run's jobs, the past run times it predicts from, and what
// Predict says. They are plain data defined here rather than the parser's own types
// (internal/jobgraph) so that the parser and its actionlint dependency stay out of workflow
// code, and so that what a history records changes only as these types do (fields added,
// never repurposed).

// RunGraph is the jobs of a workflow run's file, as Predict reads them
// (jobgraph.Graph.RunGraph derives it from a parsed file).
type RunGraph struct {
	Jobs []RunGraphJob `json:"jobs"`
}

// RunGraphJob is one job of the file, before its matrix expands. Its zero value predicts
// nothing: labels and instance count unknown.
type RunGraphJob struct {
	// ID is the job's key under jobs:, as written; ids are compared case-insensitively, as
	// GitHub compares them.
	ID string `json:"id"`
	// Name is the job's name: as written, empty when it has none (GitHub then names it by
	// its id). GitHub names a matrix instance "<name> (<values>)". NameUnknown marks a name
	// with an expression, known only in the run: such a job's events cannot be told apart
	// from its name (graphJobOf).
	Name        string `json:"name,omitempty"`
	NameUnknown bool   `json:"nameUnknown,omitempty"`
	// Needs are the ids of the jobs it waits for.
	Needs []string `json:"needs,omitempty"`
	// Labels are its runs-on labels, meaningful only when LabelsKnown.
	Labels []string `json:"labels,omitempty"`
	// LabelsKnown is false when runs-on, or one of its labels, is an expression evaluated only
	// in the run, or the job calls a reusable workflow: which pool serves it is not known.
	LabelsKnown bool `json:"labelsKnown,omitempty"`
	// LabelsCut: the job's labels were more or longer than a pool keeps
	// (PrewarmGraphLabelsMax, PrewarmGraphTextMax): LabelsKnown is false, Labels empty.
	LabelsCut bool `json:"labelsCut,omitempty"`
	// If is the job's if: condition as written, empty when it has none; in a pool's state
	// cut to PrewarmGraphTextMax (Predict needs only that there is one).
	If string `json:"if,omitempty"`
	// Instances is how many jobs its matrix expands to (1 without a matrix); zero when the
	// matrix is an expression evaluated only in the run.
	Instances int `json:"instances,omitempty"`
}

// ObservedJob is what the pool has seen of one job of the run: one entry per job GitHub
// reported, so a matrix contributes one entry per instance, all with the file's job id. The
// caller maps GitHub's job name ("Build image", "deploy (eu, web)") to the file's id.
type ObservedJob struct {
	JobID     string    `json:"jobId"`
	Queued    time.Time `json:"queued,omitzero"`
	Started   time.Time `json:"started,omitzero"`
	Completed time.Time `json:"completed,omitzero"`
	// Conclusion is GitHub's, set once Completed is: "success", "failure", "cancelled",
	// "skipped", "timed_out"...
	Conclusion string `json:"conclusion,omitempty"`
}

// JobDurations is one job's recent run times (started to completed) in earlier runs of the
// same workflow, newest last; RecordJobDuration keeps them.
type JobDurations struct {
	JobID     string          `json:"jobId"`
	Durations []time.Duration `json:"durations"`
}

// PredictPolicy is what a prediction rests on; PrewarmPredictPolicy (policy.go) gives the
// reason for each value. A zero field takes PrewarmPredictPolicy's.
type PredictPolicy struct {
	// Quantile of a job's recent run times that predicts how long it runs, in (0, 1].
	Quantile float64 `json:"quantile,omitempty"`
	// MinSamples: fewer run times than this predict nothing.
	MinSamples int `json:"minSamples,omitempty"`
	// Kept: only the newest Kept run times count.
	Kept int `json:"kept,omitempty"`
}

// PredictInput is everything a prediction depends on; Predict reads nothing else.
type PredictInput struct {
	Graph    RunGraph
	Observed []ObservedJob
	// History holds the recent run times of this workflow's jobs (not only this run's).
	History []JobDurations
	// PoolLabels are the predicting pool's labels: a job is its to predict when LabelsFit says
	// the pool's runners can run it. Where several pools fit a job, the intake routes it to
	// one (by scope and runner group): the caller asks only the pool it would route to.
	PoolLabels []string
	Now        time.Time
	Policy     PredictPolicy
}

// PredictionKind says what a prediction tells the pool to do.
type PredictionKind string

const (
	// PredictedQueued: the job will be queued at QueuedAt and needs Runners runners.
	PredictedQueued PredictionKind = "queued"
	// PredictedSkipped: a job it needs failed, was cancelled or skipped (or will be), so the
	// job will be skipped: runners warmed for it can go.
	PredictedSkipped PredictionKind = "skipped"
	// NotPredicted: when, or whether, the job is queued cannot be told yet; Why says what is
	// missing. A later prediction, with more of the run seen, may tell.
	NotPredicted PredictionKind = "unknown"
)

// JobPrediction is Predict's answer for one job of the run that has not been queued yet.
type JobPrediction struct {
	JobID string         `json:"jobId"`
	Kind  PredictionKind `json:"kind"`
	// QueuedAt is when the last job it needs is predicted to finish: the job is queued then.
	// It may be before Now when that job finished and the queued event has not been seen yet.
	QueuedAt time.Time `json:"queuedAt,omitzero"`
	// Runners is how many runners the job needs: its matrix's instances. A matrix's
	// max-parallel, which the parser does not read yet, would make it fewer at once.
	Runners int `json:"runners,omitempty"`
	// After names the needed job that decides: the one finishing last, or the one that failed.
	After string `json:"after,omitempty"`
	// Why explains the prediction, for the pool's status and `starter why`.
	Why string `json:"why"`
}

// ActivityReadRunGraph reads a run's workflow file at its commit and returns its job graph
// (activities/github_rungraph.go).
const ActivityReadRunGraph = "ReadRunGraph"

// ReadRunGraphInput names the file of one run: its repository, the commit the run is at, and
// the file's path when the pool knows it from an earlier run of the workflow, and the run,
// whose path GitHub is asked for when the path is not known (a workflow_job event does not
// carry it) or turns out stale.
type ReadRunGraphInput struct {
	// Repository is "owner/repo".
	Repository string `json:"repository"`
	// HeadSHA is the run's commit; the file is read there, not at the branch's head.
	HeadSHA string `json:"headSha"`
	// Path is the workflow file's path, e.g. ".github/workflows/ci.yml"; empty means read the
	// run (RunID) first to learn it.
	Path string `json:"path,omitempty"`
	// RunID is the run, needed when Path is empty; with a Path, the run read when the file is
	// not at that path at the commit, or is another workflow's (the workflow was moved or
	// renamed since the path was learned).
	RunID int64 `json:"runId,omitempty"`
	// Workflow is the run's workflow name as its events report it: a file read at a known
	// Path whose name is another is not the run's. Empty: not checked.
	Workflow string `json:"workflow,omitempty"`
}

// Why a ReadRunGraphResult holds no graph: each is an answer, not a failure, so the caller
// falls back to deciding without a prediction.
const (
	// RunGraphNotFound: GitHub has no such run, file or commit (404).
	RunGraphNotFound = "not-found"
	// RunGraphInvalid: the file is not a workflow the parser understands.
	RunGraphInvalid = "invalid"
	// RunGraphTooLarge: the file is over the 1 MB the contents API returns content for.
	RunGraphTooLarge = "too-large"
)

// ReadRunGraphResult is the run's graph, or, Graph nil, why there is none. It holds no file
// content.
type ReadRunGraphResult struct {
	Graph *RunGraph `json:"graph,omitempty"`
	// NoGraph is one of the RunGraph* reasons when Graph is nil.
	NoGraph string `json:"noGraph,omitempty"`
	// Path is the file last read: as given, or as the run named it when none was given or
	// the given one was stale; empty when no file was read (the run was not found).
	Path string `json:"path,omitempty"`
	// Calls is how many GitHub calls the read made: 1 with the path known, 2 without, 3 when
	// the known path was stale.
	Calls int `json:"calls"`
}

// PrewarmSpec is a pool's prewarm section: `prewarm: {enabled: true, grace: 2m}`. A section
// rather than a bool so that later settings (a quantile of its own) join it without a new
// field; enabled is explicit so a section can be kept, switched off, with its grace.
type PrewarmSpec struct {
	// Enabled turns prediction on for the pool. Off by default.
	Enabled bool `json:"enabled"`
	// Grace is how long past the time a job was predicted to be queued the runners warmed for
	// it wait for it before the pool lets them go; nil: DefaultPrewarmGrace.
	Grace *metav1.Duration `json:"grace,omitempty"`
}

// PrewarmOn reports whether the pool predicts its runs' downstream jobs.
func (s PoolSpec) PrewarmOn() bool { return s.Prewarm != nil && s.Prewarm.Enabled }

// PrewarmGraceOrDefault is the prewarm grace in force.
func (s PoolSpec) PrewarmGraceOrDefault() time.Duration {
	if s.Prewarm == nil {
		return DefaultPrewarmGrace
	}
	return durationOr(s.Prewarm.Grace, DefaultPrewarmGrace)
}

// PrewarmState is a prewarming pool's memory, carried across continue-as-new: the runs it
// follows and its workflows' recent run times. Nil in pools that do not prewarm. Slices, not
// maps: workflow code must not depend on map order.
type PrewarmState struct {
	// Runs are the runs the pool has heard jobs of, in the order first heard, at most
	// PrewarmRunsKept.
	Runs []PrewarmRun `json:"runs,omitempty"`
	// Durations are recent run times per workflow, in the order first recorded, at most
	// PrewarmWorkflowsKept.
	Durations []WorkflowDurations `json:"durations,omitempty"`
	// Released counts runners warmed for predictions that failed which the pool has not let
	// go yet: Decide drains them even within the scale-down delay (they were never a
	// burst's).
	Released int `json:"released,omitempty"`
	// ReleasedUntil bounds Released: past it (the grace after the last release) the runners
	// still there are let go by the scale-down like any other.
	ReleasedUntil time.Time `json:"releasedUntil,omitzero"`
	// StartLatencies are the pool's last starts (deciding to start a runner → the runner
	// online), newest last, at most PrewarmLatenciesKept: StartLatency reads them.
	StartLatencies []time.Duration `json:"startLatencies,omitempty"`
	// Paths are the workflow files' paths the pool read its runs' graphs from, least recently
	// read first, at most PrewarmPathsKept: a later run of the same workflow is read in one
	// call instead of two (KnownPath).
	Paths []WorkflowPath `json:"paths,omitempty"`
	// Counts are what the prewarm metrics count and the pool has not emitted yet
	// (prewarm_count.go): kept here so that a count made just before continue-as-new is
	// emitted by the next run. State only: no decision reads them.
	Counts PrewarmCounts `json:"counts,omitzero"`
}

// WorkflowPath is where one workflow's file was last read.
type WorkflowPath struct {
	// Workflow is "owner/repo" and the workflow's name, as WorkflowDurations names it.
	Workflow string `json:"workflow"`
	Path     string `json:"path"`
}

// PrewarmRun is one workflow run the pool follows.
type PrewarmRun struct {
	// Repository ("owner/repo"), RunID, HeadSHA and Workflow (its name) identify the run
	// and where its file is read.
	Repository string `json:"repository"`
	RunID      int64  `json:"runId"`
	HeadSHA    string `json:"headSha"`
	Workflow   string `json:"workflow,omitempty"`
	// Graph is the run's file's jobs once read, as boundRunGraph keeps them; NoGraph says
	// why there is none (a RunGraph* reason, PrewarmTooManyJobs, PrewarmGraphTooLarge, or the
	// read's failure). Neither set: not read yet.
	Graph   *RunGraph `json:"graph,omitempty"`
	NoGraph string    `json:"noGraph,omitempty"`
	// Jobs are the run's jobs the pool heard of, one per GitHub job (a matrix instance each).
	Jobs []PrewarmJobSeen `json:"jobs,omitempty"`
	// Warmed are the jobs the pool warmed runners for, and what became of each.
	Warmed []PrewarmWarmed `json:"warmed,omitempty"`
	// Heard is when the pool last heard of the run.
	Heard time.Time `json:"heard"`
}

// PrewarmJobSeen is one GitHub job of a followed run, as its events told it.
type PrewarmJobSeen struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	// Queued, Started and Completed are the job's times as its events told them (Queued:
	// when the intake took the queued event; zero when that event was not heard).
	Queued     time.Time `json:"queued,omitzero"`
	Started    time.Time `json:"started,omitzero"`
	Completed  time.Time `json:"completed,omitzero"`
	Conclusion string    `json:"conclusion,omitempty"`
	// Recorded is set once its run time is in the workflow's durations.
	Recorded bool `json:"recorded,omitempty"`
}

// Why the pool no longer warms runners for a job it warmed for (PrewarmWarmed.Over).
const (
	// WarmTaken: the job was queued; its runners are the job's now (its reservation's).
	WarmTaken = "queued"
	// WarmSkipped: a job it needs failed: it will be skipped, its runners go.
	WarmSkipped = "skipped"
	// WarmMissed: it was not queued within the grace past its predicted time: its runners go.
	WarmMissed = "missed"
)

// PrewarmWarmed is one job the pool warmed runners for.
type PrewarmWarmed struct {
	// JobID is the file's job id.
	JobID   string `json:"jobId"`
	Runners int    `json:"runners"`
	// ReadyBy is when the job was predicted to be queued as its runners started: the
	// prediction is missed when the job is not queued by ReadyBy plus the grace, however the
	// prediction moved since (a dependency running late is predicted due at every look).
	ReadyBy time.Time `json:"readyBy"`
	// Over is why the pool no longer warms for it (Warm*), empty while it does.
	Over string `json:"over,omitempty"`
	// At is when the pool began warming for it, for the wasted runner time and `starter
	// why`; zero in entries made before the field. State only: no decision reads it.
	At time.Time `json:"at,omitzero"`
}

// WorkflowDurations are the recent run times of one workflow's jobs.
type WorkflowDurations struct {
	// Workflow is "owner/repo" and the workflow's name: "acme/app CI".
	Workflow string         `json:"workflow"`
	Jobs     []JobDurations `json:"jobs"`
	// LastRun is when a run time was last recorded, which decides what is forgotten first.
	LastRun time.Time `json:"lastRun"`
}

// PrewarmTooManyJobs is PrewarmRun.NoGraph for a file with more than PrewarmGraphJobsMax jobs.
const PrewarmTooManyJobs = "too-many-jobs"

// PrewarmGraphTooLarge is PrewarmRun.NoGraph for a graph the pool's state cannot hold: kept
// form over PrewarmGraphBytesMax, or a job id over PrewarmGraphTextMax (boundRunGraph).
const PrewarmGraphTooLarge = "graph-too-large"
