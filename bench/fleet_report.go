package main

import (
	"fmt"
	"io"
)

// FleetResult is the --pools phase: many pools in one organization served by several worker
// replicas, what the runner listing costs at rest and through a burst, and how many signals
// a pod transition costs (docs/benchmarks.md, "One listing per organization").
type FleetResult struct {
	Pools          int `json:"pools"`
	RunnersPerPool int `json:"runnersPerPool"`
	Workers        int `json:"workers"`
	// Jobs is the burst's size; UpSeconds how long every pool took to bring its runners online.
	Jobs      int     `json:"jobs"`
	UpSeconds float64 `json:"upSeconds"`
	// Rest is fleetRestIntervals rest intervals with every runner idle; Burst is from the jobs'
	// queueing until every one ran and every pool's runners were replaced and online.
	Rest  FleetWindow `json:"rest"`
	Burst FleetWindow `json:"burst"`
	// Before is what the same fleet cost with each pool listing for itself (computed).
	Before FleetBefore `json:"before"`
}

// FleetWindow is one measured window.
type FleetWindow struct {
	Seconds float64 `json:"seconds"`
	// GitHubCalls are all API calls in the window, ListingCalls the runner listing's pages.
	GitHubCalls         int     `json:"githubCalls"`
	GitHubCallsPerHour  float64 `json:"githubCallsPerHour"`
	ListingCalls        int     `json:"listingCalls"`
	ListingCallsPerHour float64 `json:"listingCallsPerHour"`
	// Listings are the scope's listings (ListRunners activities), PagesPerListing the calls
	// each made; PoolSignals the listing workflow's signals to pools.
	Listings        int     `json:"listings"`
	PagesPerListing float64 `json:"pagesPerListing"`
	PoolSignals     int     `json:"poolSignals"`
	// PoolActions are the billable actions of the pools' and the listing workflow's histories.
	PoolActions        int                `json:"poolActions"`
	PoolActionsPerHour float64            `json:"poolActionsPerHour"`
	Runners            FleetRunnerSignals `json:"runners"`
}

// FleetRunnerSignals are the signals the fleet's runner workflows received in a window.
type FleetRunnerSignals struct {
	// PodSignals are the pod watcher's, PodTransitions the distinct pod statuses they carried.
	PodSignals              int     `json:"podSignals"`
	PodTransitions          int     `json:"podTransitions"`
	PodSignalsPerTransition float64 `json:"podSignalsPerTransition"`
	// StatusSignals are the pools' runner-status signals (news from the listing).
	StatusSignals int `json:"statusSignals"`
}

// FleetBefore is the fleet's listing cost with one listing per pool: every pool lists every
// page, every PoolListingInterval at rest and every PoolListingIntervalStarting while its
// runners register, each listing an activity and a timer of the pool's.
type FleetBefore struct {
	PagesPerListing         float64 `json:"pagesPerListing"`
	RestListingCallsPerHour float64 `json:"restListingCallsPerHour"`
	BurstListingCallsPerHr  float64 `json:"burstListingCallsPerHour"`
	RestListingActionsPerHr float64 `json:"restListingActionsPerHour"`
}

// printFleet prints the --pools phase's rows.
func printFleet(w io.Writer, f *FleetResult) {
	if f == nil {
		return
	}
	title := fmt.Sprintf("F %d pools × %d runners, 1 org, %d workers", f.Pools, f.RunnersPerPool, f.Workers)
	row(w, title, "runners online", fmt.Sprintf("after %.0fs", f.UpSeconds))
	for _, x := range []struct {
		name   string
		w      FleetWindow
		before float64
	}{{"at rest", f.Rest, f.Before.RestListingCallsPerHour}, {fmt.Sprintf("burst of %d jobs", f.Jobs), f.Burst, f.Before.BurstListingCallsPerHr}} {
		row(w, "", "GitHub calls/hour "+x.name, fmt.Sprintf("%.0f listing (%d listings × %.1f pages in %.0fs; one listing per pool: %.0f), %.0f in all",
			x.w.ListingCallsPerHour, x.w.Listings, x.w.PagesPerListing, x.w.Seconds, x.before, x.w.GitHubCallsPerHour))
		row(w, "", "Temporal "+x.name, fmt.Sprintf("%.0f actions/hour in pools and listing (%d signals to pools)", x.w.PoolActionsPerHour, x.w.PoolSignals))
		r := x.w.Runners
		row(w, "", "runner signals "+x.name, fmt.Sprintf("%.2f pod signals per pod transition (%d / %d); %d listing news to runners",
			r.PodSignalsPerTransition, r.PodSignals, r.PodTransitions, r.StatusSignals))
	}
	row(w, "", "one listing per pool (computed)", fmt.Sprintf("%.0f actions/hour at rest for the listing alone (an activity and a timer per pool and listing)", f.Before.RestListingActionsPerHr))
}
