package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// Containers lists the engine's running containers, leaving out
// layerprobe's own (labelled io.layerprobe.managed=true), with what inspect
// says about each. A container that goes away between the list and its
// inspection is skipped. env names the environment variables to report.
func (c *Client) Containers(ctx context.Context, env []string) ([]engine.Container, error) {
	list, err := c.api.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("status", "running"),
	})
	if err != nil {
		return nil, c.fail("list containers", err)
	}
	out := make([]engine.Container, 0, len(list.Items))
	for _, s := range list.Items {
		if s.Labels[engine.LabelManaged] == "true" {
			continue
		}
		res, err := c.api.ContainerInspect(ctx, s.ID, client.ContainerInspectOptions{})
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, c.fail("inspect container "+containerName(s.Names, s.ID), err)
		}
		out = append(out, containerOf(res.Container, env))
	}
	return out, nil
}

// containerOf keeps what the advisor needs of an inspect answer.
func containerOf(in container.InspectResponse, env []string) engine.Container {
	ct := engine.Container{ID: in.ID, Name: strings.TrimPrefix(in.Name, "/"), ImageID: in.Image, Driver: in.Driver}
	if in.Config != nil {
		ct.Image = in.Config.Image
		ct.Env = engine.PickEnv(in.Config.Env, env)
	}
	if st := in.State; st != nil {
		ct.Pid = st.Pid
		ct.StartedAt, _ = time.Parse(time.RFC3339Nano, st.StartedAt)
	}
	if gd := in.GraphDriver; gd != nil {
		if ct.Driver == "" {
			ct.Driver = gd.Name
		}
		ct.UpperDir = gd.Data["UpperDir"]
	}
	for _, m := range in.Mounts {
		ct.Mounts = append(ct.Mounts, engine.Mount{Type: string(m.Type), Name: m.Name, Source: m.Source,
			Destination: m.Destination, Driver: m.Driver, RW: m.RW})
	}
	return ct
}

// ContainerLayerSize is the engine's own figure for the size of a
// container's writable layer (SizeRw). The engine computes it on request by
// walking the layer (for btrfs, zfs and vfs by comparing it with its
// parent), which is why the advisor asks for it only where the driver
// gives no upper directory to walk itself, and bounds the wait with ctx.
func (c *Client) ContainerLayerSize(ctx context.Context, id string) (int64, error) {
	res, err := c.api.ContainerInspect(ctx, id, client.ContainerInspectOptions{Size: true})
	if err != nil {
		return 0, c.fail("inspect the size of container "+shortID(id), err)
	}
	if res.Container.SizeRw == nil {
		return 0, fmt.Errorf("engine %s reported no writable-layer size for container %s", c.name, shortID(id))
	}
	return *res.Container.SizeRw, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
