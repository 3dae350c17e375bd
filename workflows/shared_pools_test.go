package workflows

import (
	"testing"
	"time"
)

func TestSharedPoolTableTakesDemands(t *testing.T) {
	table := func(names ...string) []ScopeListingPool {
		var out []ScopeListingPool
		for _, n := range names {
			out = append(out, ScopeListingPool{ListingDemand: ListingDemand{Pool: n, Interval: time.Minute}})
		}
		return out
	}
	for _, c := range []struct {
		name     string
		pools    []ScopeListingPool
		pool     string
		interval time.Duration
		want     []string
		existing bool
	}{
		{"a new pool is added in name order", table("a", "c"), "b", time.Minute, []string{"a", "b", "c"}, false},
		{"a known pool is handed back to update", table("a", "b"), "b", time.Minute, []string{"a", "b"}, true},
		{"a withdrawal removes the pool", table("a", "b"), "a", 0, []string{"b"}, false},
		{"an unknown pool's withdrawal changes nothing", table("a"), "z", 0, []string{"a"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			entry := ScopeListingPool{ListingDemand: ListingDemand{Pool: c.pool, Interval: c.interval}}
			got, p := applyDemand(c.pools, entry, c.interval)
			var names []string
			for _, g := range got {
				names = append(names, g.Pool)
			}
			if len(names) != len(c.want) {
				t.Fatalf("pools %v, want %v", names, c.want)
			}
			for i := range names {
				if names[i] != c.want[i] {
					t.Fatalf("pools %v, want %v", names, c.want)
				}
			}
			if (p != nil) != c.existing || (p != nil && p.Pool != c.pool) {
				t.Fatalf("entry %+v, want existing=%t for %q", p, c.existing, c.pool)
			}
		})
	}
}
