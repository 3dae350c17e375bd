package workflows

import "slices"

// Where a prewarming pool reads its runs' files: a workflow_job event names the run, not its
// workflow file, so the first read of a workflow's run asks GitHub for the run's path; the
// pool remembers it (PrewarmState.Paths) and reads later runs of the workflow in one call.

// KnownPath is the path the run's workflow file was last read from in an earlier run, empty
// when the pool knows none: the run's graph is then read in one call, not two.
func KnownPath(st PrewarmState, run PrewarmRun) string {
	i := slices.IndexFunc(st.Paths, func(p WorkflowPath) bool { return p.Workflow == run.workflowKey() })
	if i < 0 || run.Workflow == "" {
		return ""
	}
	return st.Paths[i].Path
}

// rememberPath records the path a run's file was read from (found there, whether or not it
// parsed) as its workflow's, most recently read last, within PrewarmPathsKept. A run whose
// workflow name is unknown or may have been cut (two workflows could share what is kept of
// it), or a path over PrewarmPathMax, is not remembered: its workflow's runs cost a call more.
func (st *PrewarmState) rememberPath(run PrewarmRun, path string) {
	if path == "" || run.Workflow == "" || !textFitsIn(path, PrewarmPathMax) ||
		!textFitsIn(run.Workflow, PrewarmSeenNameMax-jsonCost('…')) {
		return
	}
	key := run.workflowKey()
	st.Paths = slices.DeleteFunc(st.Paths, func(p WorkflowPath) bool { return p.Workflow == key })
	st.Paths = append(st.Paths, WorkflowPath{Workflow: key, Path: path})
	st.Paths = st.Paths[max(len(st.Paths)-PrewarmPathsKept, 0):]
}
