package workflows

// ScaleSetSpec makes a pool a runner scale set's: GitHub's own autoscaling protocol, in which a
// listener holds a message session with the Actions service and runners get just-in-time
// configurations from the set (docs/pools.md, Runner scale sets). The set is registered in the
// pool's scope and runner group, carries the pool's labels, and its runners are bounded by the
// pool's minReplicas and maxReplicas.
type ScaleSetSpec struct {
	// Name is the set's name at GitHub, unique within its runner group; empty means the
	// pool's name.
	Name string `json:"name,omitempty"`
	// KeepOnDelete leaves the set at GitHub when the pool is deleted; by default it goes with
	// the pool.
	KeepOnDelete bool `json:"keepOnDelete,omitempty"`
}

// withDefaults names the set after the pool when the spec names it not.
func (s ScaleSetSpec) withDefaults(pool string) ScaleSetSpec {
	out := s
	if out.Name == "" {
		out.Name = pool
	}
	return out
}

// IsScaleSet reports whether the pool is a runner scale set's.
func (s PoolSpec) IsScaleSet() bool { return s.ScaleSet != nil }
