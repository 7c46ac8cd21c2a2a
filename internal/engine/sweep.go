package engine

// Owner tests of the sweeps, from the labels layerprobe puts on what it
// creates (LabelOwner, LabelEngine). Every client's Sweep and SweepStale
// remove exactly what these say.

// DeadOwner says whether a sweep removes an object with these labels: its
// owner is not alive, or alive is nil (remove everything labelled).
func DeadOwner(alive func(owner string) bool) func(labels map[string]string) bool {
	return func(labels map[string]string) bool {
		return alive == nil || !alive(labels[LabelOwner])
	}
}

// StaleOwner is DeadOwner for the sweep before a new probe session: it also
// removes what this very process (owner) created for the same engine name.
// A process runs at most one session per engine and prepares a new one only
// when the old one is gone, so these can only be leftovers of a session
// whose removal failed while the engine was down.
func StaleOwner(alive func(owner string) bool, owner, engineName string) func(labels map[string]string) bool {
	dead := DeadOwner(alive)
	return func(labels map[string]string) bool {
		if owner != "" && labels[LabelOwner] == owner && labels[LabelEngine] == engineName {
			return true
		}
		return dead(labels)
	}
}
