package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// An engine in a VM cannot join the probe container's cgroups by design
// (not_applicable): it has no layerprobe_host_arm_cgroup_joined series, so
// LayerprobeHostArmOutsideCPUCgroup (== 0 over 30m) cannot fire for it,
// while an engine that failed to join still has its 0.
func TestHostArmNotApplicableHasNoSeries(t *testing.T) {
	for state, want := range map[string]int{"not_applicable": 0, "outside": 1, "joined": 1} {
		snap := &Snapshot{Engines: []Engine{{Name: "vm", EngineFacts: measure.EngineFacts{Runtime: "docker", Driver: "overlay2",
			HostArmCgroup: state, TopologyFacts: measure.TopologyFacts{Topology: "vm", Baseline: "native host disk"}}}}}
		if got := testutil.CollectAndCount(NewCollector(staticSource{snap}, true), "layerprobe_host_arm_cgroup_joined"); got != want {
			t.Errorf("host arm %q: %d series, want %d", state, got, want)
		}
	}
}
