package agent

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/metrics"
)

// userContainers makes containers whose upper directories hold the given
// bytes under /data; "pg" runs a postgres image without a volume.
func userContainers(t *testing.T, sizes map[string]int) []engine.Container {
	t.Helper()
	var out []engine.Container
	for name, n := range sizes {
		upper := filepath.Join(t.TempDir(), "diff")
		if err := os.MkdirAll(filepath.Join(upper, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(upper, "data", "blob"), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		c := engine.Container{ID: name + "-id", Name: name, Image: "app:1", StartedAt: time.Now().Add(-time.Hour),
			Driver: "overlay2", UpperDir: upper}
		if name == "pg" {
			c.Image = "postgres:16"
		}
		out = append(out, c)
	}
	return out
}

func topNames(m *metrics.Advisor) []string {
	var out []string
	for _, c := range m.Top {
		out = append(out, c.Name)
	}
	return out
}

func TestAdvisorPassWithEveryCycle(t *testing.T) {
	// 6 rounds a cycle: the second pass (which sees the first cycle's
	// rounds) has the 6 round pairs a 95% interval needs, below which the
	// layer's cost is withheld.
	a := newTestAgent(t, func(c *config.Config) { c.Advisor.MetricsTopN = 2; c.Agent.Budget.Rounds = 6 })
	a.eng.SetSlowdown(measure.TargetContainer, 2)
	a.eng.SetContainers(userContainers(t, map[string]int{"big": 3 << 20, "mid": 2 << 20, "small": 1 << 20, "pg": 10}), nil)
	ctx := context.Background()

	a.cycleAll(ctx, triggerSchedule)
	m := a.Snapshot().Engines[0].Advisor
	if m == nil || m.Containers != 4 || !slices.Equal(topNames(m), []string{"big", "mid"}) || m.RestContainers != 2 ||
		m.RestLayerBytes != 1<<20+10 || m.DatabasesInLayer != 1 || !math.IsNaN(m.Top[0].BlockBytes) {
		t.Fatalf("advisor series after the first pass: %+v", m)
	}
	r, err := a.Containers(ctx)
	if err != nil || len(r.Engines) != 1 || len(r.Engines[0].Containers) != 4 || r.Engines[0].Containers[0].Name != "big" {
		t.Fatalf("Containers() = %+v, %v", r, err)
	}
	if e := r.Engines[0]; len(e.LayerVsVolume) != 0 || e.Containers[0].Cost != nil {
		t.Errorf("the first pass ran before any round: layer vs volume %+v, cost %+v", e.LayerVsVolume, e.Containers[0].Cost)
	}

	// The second pass has the first cycle's rounds: the layer is twice
	// as slow as the volume here, so writes take twice as long.
	a.eng.SetContainers(userContainers(t, map[string]int{"mid": 2 << 20, "small": 1 << 20, "pg": 10}), nil)
	a.cycleAll(ctx, triggerSchedule)
	r, _ = a.Containers(ctx)
	e := r.Engines[0]
	if len(e.LayerVsVolume) != len(measure.Workloads) || math.Abs(e.LayerVsVolume[0].Slowdown-1) > 1e-6 || e.Containers[0].Cost == nil {
		t.Errorf("second pass: layer vs volume %+v, cost %+v; want a slowdown of 1 and a cost", e.LayerVsVolume, e.Containers[0].Cost)
	}
	// "big" went away: no series of its own any more.
	m = a.Snapshot().Engines[0].Advisor
	if m.Containers != 3 || !slices.Equal(topNames(m), []string{"mid", "small"}) || m.RestContainers != 1 {
		t.Errorf("after big went away: %+v", m)
	}
}

func TestAdvisorOffOrUnreachable(t *testing.T) {
	a := newTestAgent(t, func(c *config.Config) { c.Advisor.Enabled = false })
	a.eng.SetContainers(userContainers(t, map[string]int{"big": 1 << 20}), nil)
	a.cycleAll(context.Background(), triggerSchedule)
	if slices.Contains(a.eng.Calls(), "Containers") || a.Snapshot().Engines[0].Advisor != nil {
		t.Errorf("advisor off: calls %v, series %+v", a.eng.Calls(), a.Snapshot().Engines[0].Advisor)
	}

	b := newTestAgent(t, nil)
	b.eng.SetContainers(userContainers(t, map[string]int{"big": 1 << 20}), nil)
	b.cycleAll(context.Background(), triggerSchedule)
	b.eng.SetInfoErr(engine.ErrUnreachable)
	b.cycleAll(context.Background(), triggerSchedule)
	r, _ := b.Containers(context.Background())
	if e := r.Engines[0]; e.Error == "" || len(e.Containers) != 0 || b.Snapshot().Engines[0].Advisor != nil {
		t.Errorf("unreachable engine: %+v, series %+v; want the error and no stale containers", e, b.Snapshot().Engines[0].Advisor)
	}
}
