package testworld

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/runnerflow/runnerflow/workflows"
)

// TemporalOptions configures the Temporal dev server of the test world.
type TemporalOptions struct {
	// Dir holds the server's database file and log.
	Dir string
	// UI turns the Web UI on (the demo wants it; tests usually do not).
	UI bool
	// SearchAttributes are registered at start, name → type (Keyword, KeywordList, Int, ...).
	SearchAttributes map[string]string
}

// Temporal is a running Temporal dev server (the real server inside the Temporal CLI).
type Temporal struct {
	// Address is the frontend's host:port for SDK clients and the CLI.
	Address string
	// UIAddress is the Web UI's http://host:port, empty without UI.
	UIAddress string
	// Namespace is the namespace the server was started with.
	Namespace string
	// CLIPath is the temporal CLI binary, for operator-command tests.
	CLIPath string

	dir      string
	args     []string
	proc     *process
	restarts int
}

// StartTemporal starts `temporal server start-dev` on free 127.0.0.1 ports and waits until the
// frontend answers.
func StartTemporal(ctx context.Context, opts TemporalOptions) (*Temporal, error) {
	cli, err := ToolPath("temporal")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	t := &Temporal{
		Address:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		Namespace: "default",
		CLIPath:   cli,
		dir:       opts.Dir,
	}
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(ports[0]),
		"--http-port", strconv.Itoa(ports[1]),
		"--metrics-port", strconv.Itoa(ports[2]),
		"--db-filename", filepath.Join(opts.Dir, "temporal.db"),
		// The state is in a file so that fault tests can restart the server and find it again;
		// power loss is no risk a test world guards against, so the file is written through
		// SQLite's write-ahead log without an fsync per commit (etcd here runs with
		// --unsafe-no-fsync for the same reason). A burst commits thousands of transactions,
		// and their fsyncs stalled the server for seconds at a time on a shared disk.
		"--sqlite-pragma", "journal_mode=wal",
		"--sqlite-pragma", "synchronous=off",
		"--namespace", t.Namespace,
		"--log-level", "warn",
	}
	// One partition per task queue, as docs/operations.md asks of a production server for the
	// GitHub queue: the server splits a queue's rate limit among its partitions and spreads the
	// tasks over them at random, so with the default four the fullest partition paces a burst.
	// The dev server takes the value for every queue; one partition is ample for a test world.
	args = append(args,
		"--dynamic-config-value", fmt.Sprintf("matching.numTaskqueueReadPartitions=%d", workflows.GitHubTaskQueuePartitions),
		"--dynamic-config-value", fmt.Sprintf("matching.numTaskqueueWritePartitions=%d", workflows.GitHubTaskQueuePartitions),
		// Eager activities, as docs/operations.md recommends: a runner's pod activity comes back
		// with the workflow task that scheduled it.
		"--dynamic-config-value", "system.enableActivityEagerExecution=true")
	if opts.UI {
		args = append(args, "--ui-port", strconv.Itoa(ports[3]))
		t.UIAddress = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3]))
	} else {
		args = append(args, "--headless")
	}
	for _, name := range sortedKeys(opts.SearchAttributes) {
		args = append(args, "--search-attribute", name+"="+opts.SearchAttributes[name])
	}
	if err := t.start(args); err != nil {
		return nil, err
	}
	if err := t.waitHealthy(ctx); err != nil {
		_ = t.Stop()
		return nil, err
	}
	return t, nil
}

func (t *Temporal) start(args []string) error {
	p, err := startProcess(t.dir, "temporal", t.CLIPath, args...)
	if err != nil {
		return err
	}
	t.proc, t.args = p, args
	return nil
}

// temporalStopGrace is how long Restart lets the server shut down on SIGTERM before killing it.
const temporalStopGrace = 15 * time.Second

// Restart stops the server as an operator's restart does (SIGTERM; SIGKILL if it has not ended
// within temporalStopGrace), leaves it down for down (a deploy's or a host's restart), and
// starts it again with the same ports, database file and settings, then waits until it answers. Histories, timers and queued tasks are in the database
// file, so they survive, as on a server with a persistent store; clients and workers see the
// frontend go away and come back at the same address.
func (t *Temporal) Restart(ctx context.Context, down time.Duration) error {
	if err := t.proc.terminate(temporalStopGrace); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	t.restarts++
	p, err := startProcess(t.dir, fmt.Sprintf("temporal-restart-%d", t.restarts), t.CLIPath, t.args...)
	if err != nil {
		return err
	}
	t.proc = p
	return t.waitHealthy(ctx)
}

// waitHealthy dials the frontend until it answers a health check, the process dies or ctx ends.
func (t *Temporal) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := client.Dial(client.Options{HostPort: t.Address, Namespace: t.Namespace, Logger: quietLogger()})
		if err == nil {
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-t.proc.exited:
			return fmt.Errorf("temporal dev server exited during start; log:\n%s", tail(t.proc.logPath, 4096))
		case <-ctx.Done():
			return fmt.Errorf("temporal dev server not healthy at %s: %w; log:\n%s", t.Address, errors.Join(err, ctx.Err()), tail(t.proc.logPath, 4096))
		case <-tick.C:
		}
	}
}

// Dial returns an SDK client for the server's namespace.
func (t *Temporal) Dial() (client.Client, error) {
	return client.Dial(client.Options{HostPort: t.Address, Namespace: t.Namespace, Logger: quietLogger()})
}

// Stop ends the server and every process it started. It is safe to call twice.
func (t *Temporal) Stop() error {
	if t.proc == nil {
		return nil
	}
	return t.proc.kill()
}
