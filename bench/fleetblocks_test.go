//go:build bench

package bench

import (
	"os"
	"strings"
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
		"engine:layerprobe_cycle_skips_total:sum":                   time.Hour,
		"job_engine_reason:layerprobe_cycle_skips:increase1h":       time.Hour,
		"job_engine:layerprobe_written_bytes:max_increase1h":        time.Hour,
		"instance_engine_target:layerprobe_overhead_ratio:headline": 5 * time.Minute,
		"job_driver_target:layerprobe_overhead_ratio:max":           5 * time.Minute,
	} {
		if got, ok := every[rec]; !ok || got != want {
			t.Errorf("%s: every %s (in the bed's rules: %v), want %s", rec, got, ok, want)
		}
	}
}

// TestUnitFleetRuleGroupGoal: a run that recorded the groups' intervals
// is judged against 10% of each (a 1m group's 1.3 s meets it, a 5m
// group's 31 s misses it); an older run without them against 100 ms.
func TestUnitFleetRuleGroupGoal(t *testing.T) {
	run := fleetRun{Hosts: 1000, Days: 30,
		RuleGroupSeconds:  map[string]float64{"layerprobe.alerts": 1.3, "layerprobe.fleet": 31, "layerprobe.recording.hourly": 0},
		RuleGroupInterval: map[string]float64{"layerprobe.alerts": 60, "layerprobe.fleet": 300, "layerprobe.recording.hourly": 3600}}
	w := &mdWriter{}
	writeFleet(w, &results{Fleet: &fleetResults{Runs: []fleetRun{run}}})
	got := w.String()
	if !strings.Contains(got, "rule groups under 10% of their interval: missed, over: layerprobe.fleet (31000 ms of 30000).") {
		t.Errorf("the 10%% goal, 31 s of a 5m group: not in\n%s", got)
	}
	run.RuleGroupInterval = nil
	w = &mdWriter{}
	writeFleet(w, &results{Fleet: &fleetResults{Runs: []fleetRun{run}}})
	if got := w.String(); !strings.Contains(got, "rule groups under 100 ms: missed, over: layerprobe.alerts (1300 ms of 100); layerprobe.fleet (31000 ms of 100).") {
		t.Errorf("a run without intervals, against 100 ms: not in\n%s", got)
	}
}
