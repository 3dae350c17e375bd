// Package githubdouble is an in-process stand-in for GitHub: the REST endpoints runnerflow calls
// (runner registration and JIT configuration, runner listing and removal, workflow runs and jobs,
// GitHub App installation tokens, a hook's webhook deliveries and their redelivery), GitHub's rate limits, workflow_job webhooks, and a small
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
//   - GitHub's documented REST limits hold per credential: the primary budget (Config.RateLimit
//     per Config.RateWindow, X-RateLimit-* on every answer, 403 with X-RateLimit-Remaining: 0
//     once spent), the secondary points limit (Config.SecondaryPointsPerMinute over a rolling
//     minute, a read 1 point, a write 5) and 100 concurrent requests, both refused with 403,
//     Retry-After and GitHub's secondary-limit message. A refused request spends nothing.
//     Runner-protocol calls are charged nothing. SetRateLimit, SetSecondaryPointsPerMinute and
//     SetSecondaryRateLimit (every call refused) change the limits of a running double.
//   - The clock is Config.Now, so rate-limit windows and token expiry can be tested without
//     waiting.
//   - Runner scale sets (actionsservice.go, scalesets.go, scalesetqueue.go, scalesetrunners.go)
//     are served as github.com/actions/scaleset calls them, and that client is their contract: a
//     registration token (a REST call, also under /api/v3 as on GitHub Enterprise Server) buys
//     an admin token and the Actions service's URL (POST /actions/runner-registration); the
//     service creates, finds, updates and deletes sets, opens one message session per set (409
//     for a second; a session nobody polls for Config.ScaleSetSessionTimeout ends), long-polls
//     the set's message queue (202 after Config.ScaleSetPollWait with nothing; a message is
//     delivered again on every poll until deleted; its queue outlives sessions) with a
//     message-queue token that expires (401; the client refreshes the session), creates a set's
//     JIT runners (the same encoded form jit/connect decodes) and gets and removes runners (400
//     JobStillRunning while busy). A queued job whose labels a set carries goes to the oldest such
//     set and then only to that set's idle runners, as on github.com. A set may instead be
//     offered its jobs, as on GitHub Enterprise Server and as ARC v0.27.6's client expects
//     (scalesetacquire.go): the set is offered the job (JobAvailable) and its runners take it
//     only after the listener acquires it with the message-queue token (POST acquirejobs, then
//     JobAssigned). Config.ScaleSetJobOffers does so for every set; Config.ScaleSetJobOffersFor
//     chooses per set or per scope, so one world serves both. ARC v0.27.6 sends its personal
//     token with Basic authentication, which the REST API accepts. Its calls are counted apart
//     (ActionsServiceCalls) and spend no REST budget. GitHub publishes no limits for the service:
//     Config.ActionsServiceCallsPerMinute (off by default) is an assumed throttle, 429 with
//     Retry-After; StartActionsServiceOutage makes it answer 5xx; DeleteScaleSet removes a set
//     as GitHub does with one idle for a week.
package githubdouble
