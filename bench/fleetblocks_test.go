//go:build bench

package bench

import (
	"os"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/fleetgen"
)

// TestUnitFleetRuleIntervals: the bed's history holds each record at its
// group's interval, as Prometheus records it: the fleet dashboard's
// hourly counter records once an hour (a panel over 30 days reads 720
// samples per series), the fleet groups' every 5 minutes; and every
// record a fleet panel reads is among them.
func TestUnitFleetRuleIntervals(t *testing.T) {
	rules, err := os.ReadFile("../deploy/prometheus/layerprobe-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	layers, err := fleetRuleLayers(rules, fleetgen.DashboardRuleGroups...)
	if err != nil {
		t.Fatal(err)
	}
	every := map[string]time.Duration{}
	for _, l := range layers {
		for _, r := range l {
			every[r.Record] = r.every
		}
	}
	for rec, want := range map[string]time.Duration{
		"engine_result:layerprobe_cycles_total:sum":                 time.Hour,
		"engine:layerprobe_written_bytes_total:sum":                 time.Hour,
		"engine_reason:layerprobe_cycle_skips_total:sum":            time.Hour,
		"instance_engine_target:layerprobe_overhead_ratio:headline": 5 * time.Minute,
		"job_driver_target:layerprobe_overhead_ratio:max":           5 * time.Minute,
	} {
		if got, ok := every[rec]; !ok || got != want {
			t.Errorf("%s: every %s (in the bed's rules: %v), want %s", rec, got, ok, want)
		}
	}
}
