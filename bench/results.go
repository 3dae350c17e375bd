package main

// Results is one benchmark run: what ran, where, and the six figures. The JSON written with
// --out is exactly this, so two runs can be compared field by field.
type Results struct {
	Date    string         `json:"date"`
	Machine Machine        `json:"machine"`
	Options OptionsSummary `json:"options"`
	// Bursts hold figures 1–4, one entry per burst size.
	Bursts []BurstResult `json:"bursts"`
	// ScaleSetBursts hold figures 1–4 for the same bursts served by scale-set pools
	// (--scaleset; bench/scaleset_burst.go): each size with sets assigned their jobs (mode
	// "scaleset"), then with sets offered them (mode "scaleset-offers").
	ScaleSetBursts []BurstResult `json:"scaleSetBursts,omitempty"`
	// Memory holds figure 5.
	Memory *MemoryResult `json:"memory,omitempty"`
	// Throughput holds figure 6 and the per-webhook-event costs of figures 2 and 3.
	Throughput *ThroughputResult `json:"throughput,omitempty"`
	// Fleet holds the --pools phase: many pools of one organization on several replicas.
	Fleet *FleetResult `json:"fleet,omitempty"`
	// PullFleet holds the --pools phase's pull fleet: pools with a pull section of 20
	// repositories each, their GitHub calls at rest and busy (bench/pullfleet.go).
	PullFleet *PullFleetResult `json:"pullFleet,omitempty"`
	// Pipelines holds the --pipelines phase: runs with a job graph, with prediction and without.
	Pipelines *PipelinesResult `json:"pipelines,omitempty"`
	// Soak holds the --soak phase: jobs at a steady rate through injected faults.
	Soak *SoakResult `json:"soak,omitempty"`
	// Peer holds another system's figures 1, 2 and 4 for the same bursts (--peer).
	Peer *PeerResult `json:"peer,omitempty"`
	// PeerScaleSet holds ARC's scale-set mode's figures 1, 2 and 4 for the same bursts
	// (--peer arc-scaleset).
	PeerScaleSet *PeerResult `json:"peerScaleSet,omitempty"`
	// PeerScaleSetTuned holds the same mode with its limits raised (--peer arc-scaleset-tuned).
	PeerScaleSetTuned *PeerResult `json:"peerScaleSetTuned,omitempty"`
	// Failures name the phases that failed and why; their figures are missing.
	Failures []string `json:"failures,omitempty"`
	// Seconds is how long the whole run took.
	Seconds float64 `json:"seconds"`
}

// Machine describes where the figures were measured.
type Machine struct {
	CPUs      int     `json:"cpus"`
	MemoryGiB float64 `json:"memoryGiB"`
	GoVersion string  `json:"goVersion"`
	OS        string  `json:"os"`
	// LoadStart and LoadEnd are /proc/loadavg when the run began and ended: the machine may be
	// shared, and a busy one slows every latency.
	LoadStart string `json:"loadStart"`
	LoadEnd   string `json:"loadEnd"`
}

// OptionsSummary records the settings the figures depend on.
type OptionsSummary struct {
	Jobs              []int   `json:"jobs"`
	IdleRunners       []int   `json:"idleRunners"`
	Rate              int     `json:"rate"`
	LoadSeconds       float64 `json:"loadSeconds"`
	JobSeconds        float64 `json:"jobSeconds"`
	GitHubBudgetPerHr int     `json:"githubBudgetPerHour"`
	// KubeQPS and KubeBurst are the in-process worker's Kubernetes client limit; 0 is the
	// worker binary's (the policy default).
	KubeQPS   float64 `json:"kubeQPS"`
	KubeBurst int     `json:"kubeBurst"`
	// MemoryKubeQPS is the worker binary's --kube-qps in the memory phase; 0 is its default.
	MemoryKubeQPS float64 `json:"memoryKubeQPS"`
	// Peer names the systems measured beside runnerflow (--peer, comma-separated), empty for
	// none.
	Peer string `json:"peer,omitempty"`
	// Pools, PoolRunners, PoolJobs and Workers are the --pools phase's (0 pools: not run).
	Pools       int `json:"pools,omitempty"`
	PoolRunners int `json:"poolRunners,omitempty"`
	PoolJobs    int `json:"poolJobs,omitempty"`
	Workers     int `json:"workers,omitempty"`
	// Soak says the soak phase ran; its settings are in its result.
	Soak bool `json:"soak,omitempty"`
	// ScaleSet says the bursts ran with scale-set pools too (--scaleset).
	ScaleSet bool `json:"scaleSet,omitempty"`
}

// BurstResult is figures 1–4 for one burst of N queued jobs across two pools.
type BurstResult struct {
	// Mode is "scaleset" for a burst served by scale-set pools that are assigned their jobs,
	// "scaleset-offers" for one whose sets are offered them, empty for webhooks.
	Mode  string `json:"mode,omitempty"`
	Jobs  int    `json:"jobs"`
	Pools int    `json:"pools"`
	// Runners is the number of runner lifecycles (runner workflows) the burst caused.
	Runners int `json:"runners"`
	// Warm is how many warm registrations the pools held when the jobs were queued;
	// HotPathRegistrations counts the registrations runner workflows made between the first
	// webhook and the last job's start (a runner that found no warm registration, so its job
	// waited on GitHub); WarmRefills the warm registrations the pools minted in that time
	// (on no job's path, but on the same paced GitHub queue).
	Warm                 int `json:"warm,omitempty"`
	HotPathRegistrations int `json:"hotPathRegistrations"`
	WarmRefills          int `json:"warmRefills,omitempty"`
	// Stranded are the runner workflows still running a minute after their pools emptied,
	// which the benchmark terminated (see docs/benchmarks.md); empty when all ended.
	Stranded []string `json:"stranded"`
	// Seconds is the whole phase: first webhook to the last runner cleaned up.
	Seconds float64       `json:"seconds"`
	Latency LatencyResult `json:"latency"`
	GitHub  GitHubResult  `json:"github"`
	// ActionsService are a scale-set burst's calls to the sets' Actions service (sessions,
	// messages, JIT configurations, removals), which GitHub does not charge to the REST budget.
	ActionsService *GitHubResult    `json:"actionsService,omitempty"`
	Temporal       TemporalResult   `json:"temporal"`
	Kubernetes     KubernetesResult `json:"kubernetes"`
	Operator       OperatorResult   `json:"operator"`
}

// LatencyResult is figure 1: per job, from the starter receiving the job's queued webhook.
type LatencyResult struct {
	// ToPoolDecision ends when the pool decided to start the runner that ran the job (its
	// child workflow initiation): the scale window and the pool update lie before it.
	ToPoolDecision Percentiles `json:"toPoolDecision"`
	// ToRunnerWorkflow ends when the server started the runner's workflow; registration and
	// the pod create come after it.
	ToRunnerWorkflow Percentiles `json:"toRunnerWorkflow"`
	ToPodCreate      Percentiles `json:"toPodCreate"`
	ToOnline         Percentiles `json:"toRunnerOnline"`
	ToStarted        Percentiles `json:"toJobStarted"`
	// QueuedToStarted runs from the job's queued time at the double to its start, in both
	// modes (a scale-set burst's other steps are measured from that time too).
	QueuedToStarted Percentiles `json:"queuedToJobStarted"`
	// AllStartedSeconds runs from the first webhook sent to the last job started.
	AllStartedSeconds float64 `json:"allStartedSeconds"`
	// SecondaryLimitSeconds is the bound GitHub sets on the same burst: the time its secondary
	// rate limit needs for one registration (a write, 5 points) per job, at the run's points a
	// minute. No system registering one runner per job at the hot path can start all jobs sooner.
	SecondaryLimitSeconds float64 `json:"secondaryLimitSeconds"`
}

// GitHubResult is figure 2 for a burst: REST calls (runner protocol excluded: GitHub does not
// charge it to the API budget).
type GitHubResult struct {
	Calls      int            `json:"calls"`
	PerRunner  float64        `json:"perRunner"`
	PerJob     float64        `json:"perJob"`
	ByEndpoint map[string]int `json:"byEndpoint"`
	// Acquisitions are, of the Actions service's calls, those acquiring offered jobs or
	// listing the acquirable ones (a set offered its jobs makes them; one assigned them none).
	Acquisitions int `json:"acquisitions,omitempty"`
}

// TemporalResult is figure 3 for a burst: what runner workflows cost on their own, what the
// pool and scale-window workflows add, and the sum per runner.
type TemporalResult struct {
	RunnerWorkflows HistoryCost `json:"runnerWorkflows"`
	PoolWorkflows   HistoryCost `json:"poolWorkflows"`
	ScaleWindows    HistoryCost `json:"scaleWindows"`
	// ScopeListings are the pools' scopes' listing workflows (listing/<scope>), which list
	// the runners at GitHub for the pools.
	ScopeListings HistoryCost `json:"scopeListings"`
	// Listeners are a scale-set burst's listener workflows (one per set).
	Listeners HistoryCost `json:"listeners"`
	// Per runner lifecycle: all four together divided by Runners.
	EventsPerRunner  float64 `json:"eventsPerRunner"`
	ActionsPerRunner float64 `json:"actionsPerRunner"`
	// RunnerOnlyActionsPerRunner counts the runner workflows' own histories only.
	RunnerOnlyActionsPerRunner float64 `json:"runnerOnlyActionsPerRunner"`
	// ActionsPerJob is all four together divided by the burst's jobs.
	ActionsPerJob float64 `json:"actionsPerJob"`
}

// KubernetesResult is figure 4: writes the worker made, by verb and resource.
type KubernetesResult struct {
	// Writes are the runners' writes; LeaseWrites the pod watcher's Lease renewals, which do
	// not grow with the runners (one every PodWatcherLeaseRetryPeriod while the burst lasts).
	Writes      int            `json:"writes"`
	LeaseWrites int            `json:"leaseWrites,omitempty"`
	PerRunner   float64        `json:"perRunner"`
	PerJob      float64        `json:"perJob"`
	ByKind      map[string]int `json:"byKind"`
}

// MemoryResult is figure 5.
type MemoryResult struct {
	BaselineRSSKiB int           `json:"baselineRssKiB"`
	Points         []MemoryPoint `json:"points"`
}

// MemoryPoint is the worker's RSS with K idle runner workflows alive.
type MemoryPoint struct {
	// Runners is K, the idle runners asked for.
	Runners int `json:"runners"`
	// Complete is false when K runners were not idle within the phase timeout; the point then
	// measures the runner workflows alive at that time, whatever their state.
	Complete bool `json:"complete"`
	// Alive counts the pools' running runner workflows, Idle the runners online and not busy
	// at GitHub, both when the RSS was read.
	Alive  int `json:"alive"`
	Idle   int `json:"idle"`
	RSSKiB int `json:"rssKiB"`
	// KiBPerRunner is (RSS − baseline) / Alive.
	KiBPerRunner float64 `json:"kibPerRunner"`
	// SetupSeconds is how long it took to bring the runners (from the previous point) up.
	SetupSeconds float64 `json:"setupSeconds"`
}

// ThroughputResult is figure 6, plus the GitHub and Temporal cost per webhook event.
type ThroughputResult struct {
	OfferedPerSecond int         `json:"offeredPerSecond"`
	Sent             int         `json:"sent"`
	Acked            int         `json:"acked"`
	Failed           int         `json:"failed"`
	AckedPerSecond   float64     `json:"ackedPerSecond"`
	AckTime          Percentiles `json:"ackTime"`
	// Reserved is the sum of the pools' reservations afterwards; Lost = Acked − Reserved.
	Reserved int `json:"reserved"`
	Lost     int `json:"lost"`
	// GitHubCalls made while the events were handled; per event is the goal-0 figure.
	GitHubCalls         int         `json:"githubCalls"`
	GitHubCallsPerEvent float64     `json:"githubCallsPerEvent"`
	Temporal            HistoryCost `json:"temporal"`
	EventsPerEvent      float64     `json:"historyEventsPerEvent"`
	ActionsPerEvent     float64     `json:"actionsPerEvent"`
}

// PeerResult is a peer's figures 1, 2 and 4 for the same bursts, measured the same way in a
// fresh world of its own (bench --peer), for the side-by-side table.
type PeerResult struct {
	// Name and Version identify the peer: actions-runner-controller and its release.
	Name    string `json:"name"`
	Version string `json:"version"`
	// Mode is ARC's mode: summerwind (RunnerDeployments scaled on webhooks) or scale sets
	// (AutoscalingRunnerSets whose listeners long-poll GitHub's Actions service).
	Mode string `json:"mode,omitempty"`
	// Tuned marks a scale-set peer run with its limits raised; Settings says which limits it
	// ran with.
	Tuned    bool   `json:"tuned,omitempty"`
	Settings string `json:"settings,omitempty"`
	// SyncPeriodSeconds, BatchSeconds and ScaleDownDelaySeconds are the summerwind mode's.
	// SyncPeriodSeconds is ARC's --sync-period: how often it reconciles every resource again,
	// which bounds how late it scales down.
	SyncPeriodSeconds float64 `json:"syncPeriodSeconds"`
	// BatchSeconds is how long ARC's webhook server batches scale requests (fixed by ARC).
	BatchSeconds float64 `json:"batchSeconds"`
	// ScaleDownDelaySeconds is the autoscalers' scale-down delay after a scale-out, the same
	// as the runnerflow pools' scale-down delay.
	ScaleDownDelaySeconds float64           `json:"scaleDownDelaySeconds"`
	Bursts                []PeerBurstResult `json:"bursts"`
}

// PeerBurstResult is figures 1, 2 and 4 of the peer for one burst of N queued jobs.
type PeerBurstResult struct {
	Jobs  int `json:"jobs"`
	Pools int `json:"pools"`
	// Runners is the number of runner lifecycles (ARC Runner resources) the burst caused.
	Runners int `json:"runners"`
	// JobsOnPeerPods counts the jobs whose runner was a pod the peer created: all of them.
	JobsOnPeerPods int `json:"jobsOnPeerPods"`
	// WebhooksSent counts the burst's webhook deliveries to the peer (queued, in_progress and
	// completed), WebhooksRefused those it did not answer with 2xx.
	WebhooksSent    int `json:"webhooksSent"`
	WebhooksRefused int `json:"webhooksRefused"`
	// Warm is how many of the peer's runners were ready (registered, idle, their pods
	// running) when the jobs were queued: with --warm, the pools' share of it; 0 when cold.
	// JobsOnWarmRunners counts the jobs that ran on one of them (a runner whose pod was
	// created before the jobs were queued).
	Warm              int `json:"warm,omitempty"`
	JobsOnWarmRunners int `json:"jobsOnWarmRunners,omitempty"`
	// Seconds is the whole phase: first webhook to the peer scaled back to its warm runners.
	Seconds float64      `json:"seconds"`
	Latency PeerLatency  `json:"latency"`
	GitHub  GitHubResult `json:"github"`
	// ActionsService is, for ARC's scale sets, their calls to GitHub's Actions service
	// (sessions, message polls, job acquisition, JIT configurations): not REST calls, not
	// charged to the REST budget, so apart from GitHub.
	ActionsService *GitHubResult    `json:"actionsService,omitempty"`
	Kubernetes     KubernetesResult `json:"kubernetes"`
	// GarbageCollectorWrites are the garbage collector's deletes of the peer's objects,
	// included in Kubernetes.Writes: the peer leaves its pods to it.
	GarbageCollectorWrites int `json:"garbageCollectorWrites"`
}

// PeerLatency is figure 1 for the peer: per job, from the peer receiving its queued webhook,
// or for ARC's scale sets, which take no webhooks, from the job's queuing at the double. A
// warm runner's steps taken before that instant count 0.
type PeerLatency struct {
	ToPodCreate       Percentiles `json:"toPodCreate"`
	ToOnline          Percentiles `json:"toRunnerOnline"`
	ToStarted         Percentiles `json:"toJobStarted"`
	AllStartedSeconds float64     `json:"allStartedSeconds"`
}
