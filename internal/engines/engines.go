// Package engines connects to a configured engine of either type: a Docker
// engine (package engine) or containerd (package containerd).
package engines

import (
	"context"
	"log/slog"
	"time"

	"github.com/layerprobe/layerprobe/internal/advisor"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/containerd"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/probe"
)

// Client is what both kinds of engine client offer: what a probe session
// needs, what the layer-write advisor asks, the container churn the agent's
// busy-host guard looks at, and Close.
type Client interface {
	probe.Engine
	advisor.Engine
	ContainerChurn(ctx context.Context, since time.Time) (int, error)
	Close() error
}

// Connect returns a client for ec. Neither kind connects here: an engine
// that is down is reported by the first call.
func Connect(ec config.Engine, logger *slog.Logger) (Client, error) {
	if ec.IsContainerd() {
		c, err := containerd.New(ec.Name, ec.Host, ec.Namespace, ec.Snapshotter, logger)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	c, err := engine.New(ec.Name, ec.Host, logger)
	if err != nil {
		return nil, err
	}
	return c, nil
}
