// Package poolcli is `starter apply` and `starter get`: apply starts or updates pool workflows
// from a pools file, get shows their status. The starter binary only dispatches to RunApply and
// RunGet, so everything here is testable against a real Temporal server.
package poolcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/internal/poolspec"
	"github.com/runnerflow/runnerflow/internal/temporalconn"
	"github.com/runnerflow/runnerflow/workflows"
)

// callTimeout bounds one Temporal call (an apply waits for the pool to take its spec).
const callTimeout = 30 * time.Second

// Connection is the Temporal connection the commands use: the same flags (address, namespace,
// TLS, API key) as the worker and `starter serve`.
type Connection struct {
	temporalconn.Config
}

func (c *Connection) flags(fs *flag.FlagSet) { c.RegisterFlags(fs) }

func (c Connection) dial() (client.Client, error) {
	opts, err := c.ClientOptions()
	if err != nil {
		return nil, err
	}
	opts.Logger = discardLogger()
	cl, err := client.Dial(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", opts.HostPort, err)
	}
	return cl, nil
}

// ApplyResult is what applying one pool did.
type ApplyResult struct {
	Pool string
	workflows.ApplyResult
}

// Apply starts or updates one pool workflow per spec with update-with-start: the pool is
// started if it is not running, and in either case the apply update hands it the spec, so
// running apply twice is harmless. Specs must already be validated (poolspec.Parse).
func Apply(ctx context.Context, c client.Client, specs []workflows.PoolSpec) ([]ApplyResult, error) {
	var results []ApplyResult
	for _, spec := range specs {
		res, err := applyOne(ctx, c, spec)
		if err != nil {
			return results, fmt.Errorf("pool %s: %w", spec.Name, err)
		}
		results = append(results, ApplyResult{Pool: spec.Name, ApplyResult: res})
	}
	return results, nil
}

func applyOne(ctx context.Context, c client.Client, spec workflows.PoolSpec) (workflows.ApplyResult, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	start := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       workflows.PoolWorkflowID(spec.Name),
		TaskQueue:                workflows.DecisionTaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// Set at start so the starter can route to the pool before its first workflow task.
		TypedSearchAttributes: spec.SearchAttributes(),
	}, workflows.PoolWorkflowType, workflows.PoolInput{Spec: spec})
	handle, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName:   workflows.UpdateApply,
			Args:         []any{workflows.ApplyRequest{Spec: spec}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return workflows.ApplyResult{}, err
	}
	var res workflows.ApplyResult
	err = handle.Get(ctx, &res)
	return res, err
}

// Status queries one pool's status.
func Status(ctx context.Context, c client.Client, pool string) (workflows.PoolStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var st workflows.PoolStatus
	v, err := c.QueryWorkflow(ctx, workflows.PoolWorkflowID(pool), "", workflows.QueryStatus)
	if err != nil {
		return st, fmt.Errorf("pool %s: %w", pool, err)
	}
	return st, v.Get(&st)
}

// Pools lists the names of the running pool workflows, sorted by the server's visibility order.
func Pools(ctx context.Context, c client.Client) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var names []string
	req := &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", workflows.PoolWorkflowType),
	}
	for {
		resp, err := c.ListWorkflow(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list pools: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			if name, ok := strings.CutPrefix(e.GetExecution().GetWorkflowId(), workflows.PoolWorkflowID("")); ok {
				names = append(names, name)
			}
		}
		if len(resp.GetNextPageToken()) == 0 {
			return names, nil
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
}

// RunApply is `starter apply -f pools.yaml [--dry-run]`: it validates the whole file first and
// starts nothing if any pool is invalid, then applies every pool.
func RunApply(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var conn Connection
	conn.flags(fs)
	file := fs.String("f", "", "pools file (YAML; - reads standard input)")
	dryRun := fs.Bool("dry-run", false, "validate the file and print the pools; start nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() > 0 {
		return errors.New("usage: starter apply -f pools.yaml [--dry-run] [--temporal-address host:port] [--namespace ns]")
	}
	specs, err := poolspec.ReadFile(*file)
	if err != nil {
		return err
	}
	if *dryRun {
		for _, s := range specs {
			fmt.Fprintf(stdout, "%s valid (template %s)\n", workflows.PoolWorkflowID(s.Name), s.TemplateHash())
		}
		return nil
	}
	c, err := conn.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	results, err := Apply(ctx, c, specs)
	for _, r := range results {
		line := fmt.Sprintf("%s %s (template %s", workflows.PoolWorkflowID(r.Pool), r.Result, r.TemplateHash)
		if r.Rollout {
			line += ", rolling out"
		}
		fmt.Fprintln(stdout, line+")")
	}
	return err
}

// RunGet is `starter get [pool] [-o text|json]`: one pool's status, or a table of all pools.
func RunGet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	fs.SetOutput(stdout)
	var conn Connection
	conn.flags(fs)
	output := fs.String("o", "text", "output format: text or json")
	pools, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pools) > 1 || (*output != "text" && *output != "json") {
		return errors.New("usage: starter get [pool] [-o text|json] [--temporal-address host:port] [--namespace ns]")
	}
	c, err := conn.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if len(pools) == 0 {
		if pools, err = Pools(ctx, c); err != nil {
			return err
		}
		return printTable(ctx, c, pools, *output, stdout)
	}
	st, err := Status(ctx, c, pools[0])
	if err != nil {
		return err
	}
	waiting, err := PoolWaiting(ctx, c, st, WhyOptions{Namespace: conn.Namespace})
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(stdout, PoolView{PoolStatus: st, Waiting: waiting})
	}
	printStatus(stdout, st)
	printWaiting(stdout, waiting)
	return nil
}

// PoolView is `starter get <pool> -o json`: the pool's status query, and its waiting jobs with
// their causes (PoolWaiting).
type PoolView struct {
	workflows.PoolStatus
	Waiting []WaitingJob `json:"waiting"`
}

// parseInterleaved parses flags that may follow positional arguments (`get mypool -o json`).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
