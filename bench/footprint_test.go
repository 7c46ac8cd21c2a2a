//go:build bench

package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// TestFootprintSmoke runs the footprint section alone in short mode (about
// two minutes): every variant through idle, cycle, settle and load, and
// node_exporter under the same load, then renders its report section.
// LAYERPROBE_BIN names the binary under test (default ../bin/layerprobe-testhooks, `make build-testhooks`).
func TestFootprintSmoke(t *testing.T) {
	bin := os.Getenv("LAYERPROBE_BIN")
	if bin == "" {
		bin = "../bin/layerprobe-testhooks"
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("layerprobe binary: %v (build it: make build-testhooks)", err)
	}
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	work := t.TempDir()
	r, err := measureFootprint(context.Background(), t, bin, d.Host, work, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Variants) != 2 || r.Variants[0].Name != "tuning off" || r.Variants[1].Name != "after" {
		t.Fatalf("variants %+v, want \"tuning off\" and \"after\"", r.Variants)
	}
	if r.StrippedBytes == 0 {
		t.Error("the stripped release binary was not measured")
	}
	for _, v := range r.Variants {
		if v.Idle.RSS == 0 || v.AfterCycle.RSS == 0 || v.CyclePeakRSS < v.AfterCycle.RSS {
			t.Errorf("%s: RSS idle %d, after cycle %d, peak %d", v.Name, v.Idle.RSS, v.AfterCycle.RSS, v.CyclePeakRSS)
		}
		if m := memoryPointsOf(v.Samples); m.settles != v.Cycles || m.afterFirst.Anon == 0 || m.between.File == 0 {
			t.Errorf("%s: memory points %+v after %d cycles: want one settling phase per cycle, anonymous and file pages", v.Name, m, v.Cycles)
		}
		if len(v.Load) != 4 {
			t.Errorf("%s: %d load rows, want 4 (2 routes x 2 rates)", v.Name, len(v.Load))
		}
		for _, l := range v.Load {
			if l.Requests == 0 || l.Errors != 0 {
				t.Errorf("%s %s at %d/s: %d requests, %d errors %v", v.Name, l.Path, l.Rate, l.Requests, l.Errors, l.ErrorKinds)
			}
		}
	}
	if len(r.NodeExporter) != 2 {
		t.Errorf("%d node_exporter rows, want 2", len(r.NodeExporter))
	}
	plots := filepath.Join(work, "plots")
	if err := os.MkdirAll(plots, 0o755); err != nil {
		t.Fatal(err)
	}
	md, err := r.markdown(plots)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{plotFootprintRSS, plotFootprintLatency} {
		if !strings.Contains(md, "bench/"+name) {
			t.Errorf("markdown does not show %s", name)
		}
		if fi, err := os.Stat(filepath.Join(plots, name)); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", name, err)
		}
	}
	if dir := os.Getenv("FOOTPRINT_KEEP"); dir != "" {
		// Keep the section and its plots to look at them.
		for _, name := range []string{plotFootprintRSS, plotFootprintLatency} {
			b, err := os.ReadFile(filepath.Join(plots, name))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
			}
			if err != nil {
				t.Error(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "footprint.md"), []byte(md), 0o644); err != nil {
			t.Error(err)
		}
	}
	t.Logf("footprint section:\n%s", md)
}

// The figures after the first cycle and between cycles come from the
// settling phases' samples: afterCycleDelay into the first, and the end
// of each, the one with the most anonymous memory; the budget counts
// RssAnon only, however large the file pages.
func TestUnitFootprintMemoryPoints(t *testing.T) {
	const mb = 1 << 20
	s := func(t float64, phase string, anon, file uint64) procSample {
		return procSample{T: t, Phase: phase, Anon: anon * mb, File: file * mb, RSS: (anon + file) * mb}
	}
	samples := []procSample{
		s(0, "idle", 5, 3), s(10, "cycle", 30, 20), s(20, "settle", 14, 20), s(21, "settle", 9, 20),
		s(22, "settle", 8, 20), s(50, "settle", 7, 19), s(51, "cycle", 30, 20), s(60, "settle", 12, 20),
		s(90, "settle", 10, 20), s(91, "load", 11, 20),
	}
	m := memoryPointsOf(samples)
	if m.settles != 2 || m.afterFirst.T != 22 || m.between.T != 90 {
		t.Fatalf("memory points %+v: want 2 settling phases, after the first cycle at t=22 (2 s in), between cycles at t=90 (10 MiB anon, the higher end)", m)
	}
	if !m.anonMet() || m.verdict() != "met" {
		t.Errorf("RssAnon 8 and 10 MiB with 20 MiB of file pages: verdict %q, want met (file pages are not budgeted)", m.verdict())
	}
	samples[8].Anon = 16 * mb
	if m := memoryPointsOf(samples); m.anonMet() {
		t.Errorf("RssAnon 16 MiB between cycles passed the %d MiB budget", anonBudgetBytes>>20)
	}
	if m := memoryPointsOf(samples[:2]); m.settles != 0 || m.verdict() != "not measured" {
		t.Errorf("no settling phase: %+v, verdict %q", m, m.verdict())
	}
}

// A footprint section from results without the stripped binary (earlier
// results) still renders, saying what was not measured, and the section
// states the budget.
func TestUnitFootprintMarkdown(t *testing.T) {
	samples := []procSample{{T: 0, Phase: "idle", RSS: 9 << 20, Anon: 5 << 20, File: 4 << 20},
		{T: 50, Phase: "settle", RSS: 20 << 20, Anon: 12 << 20, File: 8 << 20},
		{T: 52, Phase: "settle", RSS: 14 << 20, Anon: 7 << 20, File: 7 << 20},
		{T: 80, Phase: "settle", RSS: 13 << 20, Anon: 7 << 20, File: 6 << 20}}
	load := []loadResult{{Server: "layerprobe", Path: "/metrics", Rate: 20, P50Ms: 1, P99Ms: 2, MaxMs: 3},
		{Server: "layerprobe", Path: "/api/v1/overhead", Rate: 20, P50Ms: 1, P99Ms: 2, MaxMs: 3}}
	r := &footprintResult{Profile: "quick", Rates: []int{20},
		NodeExporter: []loadResult{{Server: "node_exporter", Path: "/metrics", Rate: 20, P50Ms: 1, P99Ms: 3, MaxMs: 4}},
		Variants:     []variantResult{{Name: "after", Cycles: 1, Samples: samples, Idle: samples[0], AfterCycle: samples[3], Load: load}}}
	md, err := r.markdown(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"was not measured", "7.0 + 7.0 = 14.0", "7.0 + 6.0 = 13.0", "| met |", "RssAnon"} {
		if !strings.Contains(md, want) {
			t.Errorf("footprint section lacks %q:\n%s", want, md)
		}
	}
	r.StrippedBytes = 36_000_000
	if md, err = r.markdown(t.TempDir()); err != nil || !strings.Contains(md, "36.0 MB; budget ≤ 35 MB: **missed**") {
		t.Errorf("a 36 MB stripped binary: %v\n%s", err, md)
	}
}
