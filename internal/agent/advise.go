package agent

import (
	"context"
	"math"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/advisor"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/metrics"
)

// advise runs one advisor pass over the engine, before its cycle: the pass
// only reads, so it runs whether or not the guard lets the cycle measure.
// The layer's cost comes from the same window of rounds the published
// overheads do.
func (a *Agent) advise(ctx context.Context, e *engineState) {
	info, err := a.refreshInfo(ctx, e)
	var out api.EngineContainers
	if err != nil {
		out = api.EngineContainers{Engine: e.cfg.Name, Error: err.Error()}
	} else {
		samples, err := a.store.RecentSamples(ctx, e.cfg.Name, measure.ModeSteady, a.cfg.Agent.WindowRounds)
		if err != nil {
			a.logger.Warn("read recent rounds for the advisor", "engine", e.cfg.Name, "err", err)
		}
		out = e.adv.Pass(ctx, e.cli, advisor.Input{Engine: e.cfg.Name, Info: info, Samples: samples, Confidence: measure.DefaultConfidence})
	}
	a.mu.Lock()
	// A failed pass replaces the last one: its figures are no longer
	// known to hold, and stale series would say they do.
	e.containers = &out
	a.mu.Unlock()
	a.publish()
}

// Containers implements httpapi.Source: every engine's last advisor pass.
func (a *Agent) Containers(context.Context) (api.ContainersResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	resp := api.ContainersResponse{GeneratedAt: a.now().UTC(), Confidence: measure.DefaultConfidence, Engines: []api.EngineContainers{}}
	for _, e := range a.engines {
		ec := api.EngineContainers{Engine: e.cfg.Name, Driver: e.info.Driver, LayerVsVolume: []api.LayerOverhead{},
			Containers: []api.Container{}}
		if e.containers != nil {
			ec = *e.containers
		}
		resp.Engines = append(resp.Engines, ec)
	}
	return resp, nil
}

// advisorSeries turns an engine's last pass into its metric series: the
// top containers on their own, the others summed. The caller holds a.mu.
func (a *Agent) advisorSeries(e *engineState) *metrics.Advisor {
	c := e.containers
	if c == nil || c.ObservedAt == nil {
		return nil
	}
	m := &metrics.Advisor{At: *c.ObservedAt, Containers: len(c.Containers)}
	if p := c.Pass; p != nil {
		m.PassSeconds, m.PassCPUSeconds, m.PassReadBytes = p.DurationSeconds, p.CPUSeconds, float64(p.ReadBytes)
	}
	for _, ct := range c.Containers {
		if ct.Database != nil && ct.Database.InLayer {
			m.DatabasesInLayer++
		}
	}
	top, rest := advisor.TopN(c.Containers, a.cfg.Advisor.MetricsTopN)
	for _, ct := range top {
		s := metrics.ContainerSeries{Name: ct.Name, Image: ct.Image, LayerBytes: float64(ct.Layer.Bytes), BlockBytes: math.NaN()}
		if ct.BlockIO != nil {
			s.BlockBytes = float64(ct.BlockIO.Bytes)
		}
		if ct.Database != nil && ct.Database.InLayer {
			s.Database = ct.Database.Name
		}
		m.Top = append(m.Top, s)
	}
	if rest.Containers > 0 {
		m.RestContainers, m.RestLayerBytes = rest.Containers, float64(rest.LayerBytes)
	}
	return m
}
