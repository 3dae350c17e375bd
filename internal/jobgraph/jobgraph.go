// Package jobgraph reads a GitHub Actions workflow file into the graph of its jobs: each job's
// dependencies (needs), the labels its runs-on names, and how many jobs its matrix expands to.
// The YAML and the workflow grammar are actionlint's (github.com/rhysd/actionlint); this
// package only walks the tree actionlint's Parse gives.
//
// Nothing is resolved at run time: a label or a matrix that holds a ${{ }} expression cannot
// be known before the run, so it is marked unknown rather than guessed.
package jobgraph

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rhysd/actionlint"
)

// Graph is a workflow file's jobs, in the order the file lists them.
type Graph struct {
	// Name is the workflow's name: as written, or empty when the file names none (GitHub then
	// shows the file's path).
	Name string
	Jobs []Job
}

// Job is one job of the file, before its matrix expands.
type Job struct {
	// ID is the job's key under jobs:, as written (GitHub compares ids case-insensitively).
	ID string
	// Name is the job's name: as written, else its ID. GitHub names the jobs of a matrix
	// "<Name> (<values>)" unless Name holds an expression.
	Name string
	// NameUnknown marks a name holding a ${{ }} expression: the jobs' names are known only at
	// run time.
	NameUnknown bool
	// If is the job's if: condition as written; empty when it has none. A job with one may be
	// skipped whatever its needs did.
	If string
	// Needs are the ids of the jobs it waits for, as written.
	Needs []string
	// Labels are the runs-on labels. A label holding an expression is Unknown.
	Labels []Label
	// LabelsUnknown is set when runs-on as a whole is an expression, or the job has no runs-on
	// (a call of a reusable workflow): which runners it needs cannot be read from the file.
	LabelsUnknown bool
	// Group is the runner group runs-on names, if any.
	Group string
	// Matrix is how many jobs the job expands to.
	Matrix Matrix
}

// Label is one runs-on label.
type Label struct {
	Value string
	// Unknown marks a label holding a ${{ }} expression, known only once the run evaluates it.
	Unknown bool
}

// Matrix is the size of a job's matrix.
type Matrix struct {
	// Size is the number of jobs the job expands to: 1 without a matrix. Zero when Unknown.
	Size int
	// Unknown is set when the matrix, a row of it, or an include or exclude entry is an
	// expression: the size is known only when the run evaluates it.
	Unknown bool
}

// LabelsKnown reports whether every label of the job is known.
func (j Job) LabelsKnown() bool {
	return !j.LabelsUnknown && !slices.ContainsFunc(j.Labels, func(l Label) bool { return l.Unknown })
}

// LabelValues returns the labels' values, as written.
func (j Job) LabelValues() []string {
	out := make([]string, len(j.Labels))
	for i, l := range j.Labels {
		out[i] = l.Value
	}
	return out
}

// Job returns the job of the given id, compared case-insensitively as GitHub does.
func (g *Graph) Job(id string) (Job, bool) {
	i := slices.IndexFunc(g.Jobs, func(j Job) bool { return strings.EqualFold(j.ID, id) })
	if i < 0 {
		return Job{}, false
	}
	return g.Jobs[i], true
}

// ErrInvalid is matched (errors.Is) by every error of Parse: the file is not a workflow this
// package can read.
var ErrInvalid = errors.New("invalid workflow file")

// maxReported bounds the problems an error lists.
const maxReported = 3

// Parse reads a workflow file. A file actionlint cannot parse, one whose needs name a job the
// file does not have, or whose needs form a cycle (both refused by GitHub) is an error
// matching ErrInvalid that names the first problems with their line and column.
func Parse(src []byte) (*Graph, error) {
	wf, errs := actionlint.Parse(src)
	if len(errs) > 0 || wf == nil {
		return nil, parseError(errs)
	}
	g := &Graph{}
	if wf.Name != nil {
		g.Name = wf.Name.Value
	}
	for _, j := range wf.Jobs {
		if j == nil || j.ID == nil {
			continue
		}
		g.Jobs = append(g.Jobs, readJob(j))
	}
	order := jobOrder(wf)
	slices.SortFunc(g.Jobs, func(a, b Job) int { return cmp.Or(cmp.Compare(order[a.ID], order[b.ID]), cmp.Compare(a.ID, b.ID)) })
	if err := g.checkNeeds(); err != nil {
		return nil, err
	}
	return g, nil
}

func parseError(errs []*actionlint.Error) error {
	if len(errs) == 0 {
		return fmt.Errorf("%w: nothing to parse", ErrInvalid)
	}
	slices.SortFunc(errs, func(a, b *actionlint.Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	msgs := make([]string, 0, maxReported)
	for _, e := range errs[:min(len(errs), maxReported)] {
		msgs = append(msgs, fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message))
	}
	if len(errs) > maxReported {
		msgs = append(msgs, fmt.Sprintf("and %d more", len(errs)-maxReported))
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(msgs, "; "))
}

// jobOrder ranks jobs by where the file defines them.
func jobOrder(wf *actionlint.Workflow) map[string]int {
	order := map[string]int{}
	for _, j := range wf.Jobs {
		if j != nil && j.ID != nil && j.ID.Pos != nil {
			order[j.ID.Value] = j.ID.Pos.Line*100000 + j.ID.Pos.Col
		}
	}
	return order
}

func readJob(j *actionlint.Job) Job {
	out := Job{ID: j.ID.Value, Name: j.ID.Value, Matrix: matrixSize(j.Strategy)}
	if j.Name != nil && j.Name.Value != "" {
		out.Name, out.NameUnknown = j.Name.Value, j.Name.ContainsExpression()
	}
	if j.If != nil {
		out.If = j.If.Value
	}
	for _, n := range j.Needs {
		out.Needs = append(out.Needs, n.Value)
	}
	r := j.RunsOn
	switch {
	case r == nil || r.LabelsExpr != nil:
		out.LabelsUnknown = true
	default:
		for _, l := range r.Labels {
			out.Labels = append(out.Labels, Label{Value: l.Value, Unknown: l.ContainsExpression()})
		}
		if r.Group != nil {
			out.Group = r.Group.Value
		}
	}
	return out
}

// checkNeeds refuses needs that name no job of the file, and cycles.
func (g *Graph) checkNeeds() error {
	for _, j := range g.Jobs {
		for _, n := range j.Needs {
			if _, ok := g.Job(n); !ok {
				return fmt.Errorf("%w: job %q needs %q, which the file does not define", ErrInvalid, j.ID, n)
			}
		}
	}
	state := map[string]int{} // 0 unseen, 1 on the path, 2 done
	var visit func(id string) error
	visit = func(id string) error {
		key := strings.ToLower(id)
		switch state[key] {
		case 1:
			return fmt.Errorf("%w: the needs of job %q form a cycle", ErrInvalid, id)
		case 2:
			return nil
		}
		state[key] = 1
		j, _ := g.Job(id)
		for _, n := range j.Needs {
			if err := visit(n); err != nil {
				return err
			}
		}
		state[key] = 2
		return nil
	}
	for _, j := range g.Jobs {
		if err := visit(j.ID); err != nil {
			return err
		}
	}
	return nil
}
