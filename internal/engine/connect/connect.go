// Package connect is the one place that connects a configured engine by
// its type: a Docker engine (Docker's API, or Podman's compatible one;
// package docker) or containerd (package containerd). Every command and the
// agent connect through it.
package connect

import (
	"log/slog"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/engine/containerd"
	"github.com/layerprobe/layerprobe/internal/engine/docker"
)

// Engine returns a client for ec. Neither kind connects here: an engine
// that is down is reported by the first call.
func Engine(ec config.Engine, logger *slog.Logger) (engine.Client, error) {
	if ec.IsContainerd() {
		c, err := containerd.New(ec.Name, ec.Host, ec.Namespace, ec.Snapshotter, logger)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	c, err := docker.New(ec.Name, ec.Host, logger)
	if err != nil {
		return nil, err
	}
	return c, nil
}
