package containerd

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/errdefs/pkg/errgrpc"
	"golang.org/x/sys/unix"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// snapshotterPlugin is the plugin type of containerd's snapshotters.
const snapshotterPlugin = "io.containerd.snapshotter.v1"

// Info asks containerd what it is and where the configured snapshotter
// keeps its data: the snapshotter's root (which the introspection service
// exports) is the data root, and its file system the backing file system.
// A snapshotter that containerd does not have, or that failed to start
// (btrfs on a root that is not btrfs), is an error naming it.
func (c *Client) Info(ctx context.Context) (engine.Info, error) {
	ctx = c.ns(ctx)
	ver, err := c.api.Version(ctx)
	if err != nil {
		// The client passes the version service's gRPC error as it is.
		err = errgrpc.ToNative(err)
		if u := c.reach.Unreachable(err); u != nil {
			return engine.Info{}, u
		}
		return engine.Info{}, c.fail("get containerd version", err)
	}
	resp, err := c.api.IntrospectionService().Plugins(ctx, fmt.Sprintf("type==%s,id==%s", snapshotterPlugin, c.snapshotter))
	if err != nil {
		return engine.Info{}, c.fail("list snapshotters", err)
	}
	if len(resp.Plugins) == 0 {
		return engine.Info{}, fmt.Errorf("engine %s: containerd at %s has no snapshotter %q", c.name, c.Endpoint(), c.snapshotter)
	}
	p := resp.Plugins[0]
	if p.InitErr != nil {
		return engine.Info{}, fmt.Errorf("engine %s: snapshotter %q of containerd at %s is not available: %s",
			c.name, c.snapshotter, c.Endpoint(), firstLine(p.InitErr.Message))
	}
	root := p.Exports["root"]
	if root == "" {
		return engine.Info{}, errors.New("engine " + c.name + ": snapshotter " + c.snapshotter + " does not say where its data lives")
	}
	info := engine.Info{
		Name:          c.name,
		Endpoint:      c.Endpoint(),
		Runtime:       engine.RuntimeContainerd,
		ServerVersion: ver.Version,
		APIVersion:    ver.Revision,
		Driver:        c.snapshotter,
		DataRoot:      root,
		ImageStore:    "containerd",
		OS:            "linux",
	}
	info.DriverClass, info.DriverNote = engine.ClassifyDriver(engine.RuntimeContainerd, c.snapshotter)
	info.BackingFS = "unknown"
	if name, err := c.fsName(root); err == nil {
		info.BackingFS = name
	} else {
		c.logger.Warn("cannot tell the snapshotter root's file system", "data_root", root, "err", err)
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		info.KernelVersion = unix.ByteSliceToString(uts.Release[:])
	}
	c.logger.Debug("engine info", "snapshotter", info.Driver, "backing_fs", info.BackingFS, "engine_version", info.ServerVersion)
	return info, nil
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}
