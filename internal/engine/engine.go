// Package engine is the vocabulary every container engine client of
// layerprobe speaks (what an engine is, the probe container, its labels and
// paths, the advisor's view of a container, the errors that mean an engine
// is down) and the one interface both clients implement. The clients are
// its subpackages: docker (Docker's API, and Podman's compatible one; the
// only importer of moby) and containerd (containerd's own API through its
// v2 client; the only importer of containerd). Package connect picks one by the configured
// engine's type.
package engine

import (
	"context"
	"time"

	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// Client is everything an engine client offers: what a probe session
// needs, what the layer-write advisor asks, the container churn the
// agent's busy-host guard looks at, and Close. Its users declare the
// smaller interfaces they need (probe.Engine, advisor.Engine).
type Client interface {
	Endpoint() string
	Info(ctx context.Context) (Info, error)
	EnsureImage(ctx context.Context, im *probeimage.Image, owner string) (string, error)
	CheckImage(ctx context.Context, ref string) error
	StartProbe(ctx context.Context, spec ProbeSpec) (*Probe, error)
	Exec(ctx context.Context, p *Probe, argv []string) (ExecResult, error)
	RemoveProbe(ctx context.Context, p *Probe) error
	Sweep(ctx context.Context, alive func(owner string) bool, includeImages bool) (SweepReport, error)
	SweepStale(ctx context.Context, alive func(owner string) bool, owner, engineName string) (SweepReport, error)

	Containers(ctx context.Context, env []string) ([]Container, error)
	ContainerLayerSize(ctx context.Context, id string) (int64, error)
	ContainerChurn(ctx context.Context, since time.Time) (int, error)

	Close() error
}
