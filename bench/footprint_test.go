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
	for _, v := range r.Variants {
		if v.Idle.RSS == 0 || v.AfterCycle.RSS == 0 || v.CyclePeakRSS < v.AfterCycle.RSS {
			t.Errorf("%s: RSS idle %d, after cycle %d, peak %d", v.Name, v.Idle.RSS, v.AfterCycle.RSS, v.CyclePeakRSS)
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
