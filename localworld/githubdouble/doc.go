// Package githubdouble is an in-process stand-in for GitHub: the REST endpoints runnerflow calls
// (runner registration and JIT configuration, runner listing and removal, workflow runs and jobs,
// repository contents, GitHub App installation tokens, a hook's webhook deliveries and their
// redelivery), GitHub's rate limits, workflow_job webhooks, and a small
// runner protocol that plays the actions runner's side (connect, acquire a job, complete it).
//
// It exists because GitHub cannot be reached from test machines, and because the behaviours
// runnerflow must survive (a busy runner that cannot be deleted, a duplicate JIT name, an
// exhausted budget, webhooks redelivered or out of order) are hard to provoke on the real
// service. Shapes follow GitHub's published OpenAPI description; contract_test.go holds the
// double to it with the real go-github client, so the double cannot drift silently.
//
// Behaviour worth knowing:
//   - A job is assigned only to an online, idle runner that can see it: a runner of the job's
//     repository, of its organization, or of the organization's enterprise, whose labels contain
//     every job label except "self-hosted" (compared case-insensitively).
//   - Ephemeral runners (every JIT runner) are removed right after their job completes.
//   - Webhooks are delivered asynchronously by Config.WebhookWorkers workers (1 keeps the order
//     of events). HoldWebhooks parks deliveries until ReleaseWebhooks, which can release them in
//     order, reversed or shuffled; Redeliver sends a delivery again under the same delivery id,
//     as GitHub's "Redeliver" button does. Failed deliveries are recorded, never retried. The
//     deliveries API (hookdeliveries.go) lists every attempt with an id and redelivers one.
//   - A repository's files live in commits (PushFiles), served by the contents endpoint at a
//     commit or branch; a run (GET .../actions/runs/{run_id}) names its file's path. StartRun runs a workflow file at a commit, parsed by runnerflow's own
//     internal/jobgraph: a job is queued once every job it needs succeeded, skipped (no runner)
//     once one did not, a matrix job is one job per combination, and RunSpec.Conclusions makes
//     a job fail whatever its runner reports (runs.go, repofiles.go; docs/testing.md lists what
//     the double assumes of runs).
//   - GitHub's documented REST limits hold per credential: the primary budget (Config.RateLimit
//     per Config.RateWindow, X-RateLimit-* on every answer, 403 with X-RateLimit-Remaining: 0
//     once spent), the secondary points limit (Config.SecondaryPointsPerMinute over a rolling
//     minute, a read 1 point, a write 5) and 100 concurrent requests, both refused with 403,
//     Retry-After and GitHub's secondary-limit message. A refused request spends nothing.
//     Runner-protocol calls are charged nothing. SetRateLimit, SetSecondaryPointsPerMinute and
//     SetSecondaryRateLimit (every call refused) change the limits of a running double.
//   - The clock is Config.Now, so rate-limit windows and token expiry can be tested without
//     waiting.
//   - Runner scale sets are served as github.com/actions/scaleset (v0.4.0) calls them, and that
//     client is their contract; the answers (statuses, exception names, messages) are the ones
//     listeners have recorded from the real Actions service, and what the public record does not
//     settle is an assumption listed in docs/testing.md. A registration token (a REST call, also
//     under /api/v3 as on GitHub Enterprise Server) buys an admin token and the service's URL
//     (POST /actions/runner-registration). The service creates, finds, updates and deletes sets
//     (a taken name 400); opens one message session per set (409 for a second, until its holder
//     closes it or Config.ScaleSetSessionTimeout passes unpolled; closing one it no longer has
//     is 400); long-polls the set's queue (202 after Config.ScaleSetPollWait with nothing) with
//     a message-queue token that expires (401; the client refreshes the session); delivers a
//     message again on every poll until it is deleted or a poll's lastMessageId passes it, with
//     at most 50 job messages to a message; creates a set's JIT runners (the same encoded form
//     jit/connect decodes) and gets and removes runners (400 JobStillRunning while busy).
//   - A queued job whose labels a set carries goes to the oldest such set with room (fewer jobs
//     assigned than the capacity its listener last reported, X-ScaleSetMaxCapacity) and then
//     only to that set's idle runners, as on github.com. A set may instead be offered its jobs,
//     as on GitHub Enterprise Server and as ARC v0.27.6's client expects: it is offered the job
//     (JobAvailable) and its runners take it only after the listener acquires it with the
//     message-queue token (POST acquirejobs, then JobAssigned). Config.ScaleSetJobOffers does so
//     for every set, Config.ScaleSetJobOffersFor per set or per scope, so one world serves both.
//     ARC v0.27.6 sends its personal token with Basic authentication, which the REST API accepts.
//   - What a listener must survive, each off by default: a job no runner takes in time is taken
//     back and assigned again, up to three times (Config.ScaleSetReassignAfter); a backlog is
//     truncated (Config.ScaleSetBacklogLimit) while the statistics count every job; messages of
//     a type no client knows (Config.ScaleSetUnknownMessages); a throttle, 429 with Retry-After
//     (Config.ActionsServiceCallsPerMinute, as GitHub publishes no limits for the service); an
//     outage (StartActionsServiceOutage); a set GitHub deletes, as it does one idle for a week
//     (DeleteScaleSet). The service's calls are counted apart (ActionsServiceCalls) and spend no
//     REST budget.
//
// Files of the Actions service: actionsservice.go (the admin connection, faults, exception
// names), scalesets.go (sets), scalesetqueue.go (sessions and their message queue),
// scalesetassign.go (jobs to sets, capacity, statistics), scalesetacquire.go (offers and their
// acquisition), scalesetreassign.go (assignments that lapse), scalesetrunners.go (the sets'
// runners and job messages).
package githubdouble
