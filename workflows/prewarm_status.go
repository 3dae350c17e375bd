package workflows

import (
	"strings"
	"time"
)

// PrewarmedJob is a job GitHub queued after the pool began warming runners for it: the
// prediction came true. PoolStatus lists them for `starter why`.
type PrewarmedJob struct {
	// JobID is GitHub's job id; Job the file's job id it is an instance of.
	JobID int64  `json:"jobId"`
	Job   string `json:"job"`
	// Repository and RunID name the run whose graph predicted it.
	Repository string `json:"repository"`
	RunID      int64  `json:"runId"`
	// WarmedAt is when the pool began warming for it (zero in state made before it was
	// kept); Queued when the intake took its queued event (zero when not heard).
	WarmedAt time.Time `json:"warmedAt,omitzero"`
	Queued   time.Time `json:"queued,omitzero"`
}

// PrewarmedJobs lists the jobs of the runs the pool follows that it had warmed runners for
// before GitHub queued them (PrewarmWarmed over as WarmTaken), each GitHub job (a matrix
// instance each) mapped to the file's job as the plan maps it. A run is followed until its
// jobs have ended, so a job is listed while it runs. At most PrewarmRunsKept runs of
// PrewarmRunJobsKept jobs.
func PrewarmedJobs(st PrewarmState) []PrewarmedJob {
	var out []PrewarmedJob
	for _, run := range st.Runs {
		if run.Graph == nil {
			continue
		}
		for _, h := range run.Warmed {
			if h.Over != WarmTaken {
				continue
			}
			for _, j := range run.Jobs {
				if id, ok := graphJobOf(*run.Graph, j.Name); ok && strings.EqualFold(id, h.JobID) {
					out = append(out, PrewarmedJob{JobID: j.ID, Job: h.JobID, Repository: run.Repository, RunID: run.RunID,
						WarmedAt: h.At, Queued: j.Queued})
				}
			}
		}
	}
	return out
}
