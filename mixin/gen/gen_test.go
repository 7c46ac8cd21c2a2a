package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const root = "../.."

// The dashboards, rules, PrometheusRule and chart files in the repository
// are what the mixin builds: `make mixin` after editing the jsonnet, never
// an edit of the outputs.
func TestOutputsUpToDate(t *testing.T) {
	files, err := build(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"dashboards/layerprobe-fleet.json", "dashboards/layerprobe-host.json", rulesFile, prometheusRule,
		chartDir + "/files/layerprobe-rules.yml", rawRatioFile,
	} {
		if _, ok := files[want]; !ok {
			t.Errorf("the mixin no longer builds %s", want)
		}
	}
	for name, b := range files {
		have, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("%s: %v (run make mixin)", name, err)
			continue
		}
		if !bytes.Equal(have, b) {
			t.Errorf("%s differs from what mixin/ builds: run make mixin (and edit the jsonnet, not the output)", name)
		}
		// Prometheus stored the workload as exported_job while the agent
		// called it job; no query may rely on that name.
		if bytes.Contains(b, []byte("exported_job")) {
			t.Errorf("%s mentions exported_job", name)
		}
	}
	// No stale output: every dashboard in the directories the mixin
	// writes comes from it.
	for _, dir := range []string{dashboardsDir, chartDir + "/files/dashboards"} {
		have, _ := filepath.Glob(filepath.Join(root, dir, "*.json"))
		for _, p := range have {
			rel, _ := filepath.Rel(root, p)
			if _, ok := files[rel]; !ok {
				t.Errorf("%s is not built by the mixin", rel)
			}
		}
	}
}

// The _config changes what the mixin builds: selectors, the cluster label,
// thresholds and for: durations are not fixed in the output.
func TestConfigReachesOutputs(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "mixin"), os.DirFS(filepath.Join(root, "mixin"))); err != nil {
		t.Fatal(err)
	}
	override := `(import 'mixin.libsonnet') + { _config+:: {
  layerprobeSelector: 'job="lp"', clusterLabel: 'region', agentIntervalHours: 2,
  fsyncOverheadAlertLevel: 0.25, showMultiCluster: false,
} }`
	main := filepath.Join(dir, "mixin", "mixin.libsonnet")
	orig, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mixin", "base.libsonnet"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(strings.Replace(override, "mixin.libsonnet", "base.libsonnet", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := build(dir)
	if err != nil {
		t.Fatal(err)
	}
	rules := string(files[rulesFile])
	for _, want := range []string{
		`layerprobe_fsync_regression{job="lp"}`, // the selector
		"unless on (region, job, instance)",     // the cluster label
		"vector(0.25)",                          // a threshold
		"for: 4h",                               // two 2h cycles
		"> 18000",                               // stale after 2.5 intervals of 2h
	} {
		if !strings.Contains(rules, want) {
			t.Errorf("rules built with the override lack %q", want)
		}
	}
	host := string(files["dashboards/layerprobe-host.json"])
	if strings.Contains(host, `cluster=~"$cluster"`) || strings.Contains(host, `region=~"$cluster"`) {
		t.Error("showMultiCluster: false still selects on the cluster in panel queries")
	}
	if !strings.Contains(host, `label_values(layerprobe_build_info{job=\"lp\"}, region)`) {
		t.Error("the cluster variable does not use the cluster label and the selector")
	}
	if !slices.Contains(strings.Fields(rules), "groups:") {
		t.Error("no groups in the rules")
	}
}
