package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Container is what the layer-write advisor needs to know about one running
// container of the user's. Everything comes from listing and inspecting:
// nothing here starts, stops, pauses or execs into a container.
type Container struct {
	ID    string
	Name  string // without the leading "/"
	Image string // the image as the user named it (Config.Image)
	// ImageID is the image's content-addressed ID.
	ImageID   string
	StartedAt time.Time
	// Pid is the container's init process in the engine host's pid
	// namespace; 0 when the engine does not say.
	Pid int
	// Driver is the storage driver of the container's writable layer;
	// UpperDir the host directory that holds it when the driver has one
	// (overlay2, fuse-overlayfs), else "".
	Driver   string
	UpperDir string
	Mounts   []Mount
	// Env holds only the environment variables asked for by name (a
	// database's data directory, say); the rest never leaves this package,
	// because containers keep secrets there.
	Env map[string]string
}

// Mount is one mount of a container.
type Mount struct {
	Type        string // volume, bind, tmpfs, ...
	Name        string // a volume's name
	Source      string // host path of a bind, or of a local volume's data
	Destination string // path inside the container
	Driver      string // volume driver (local, ...)
	RW          bool
}

// Containers lists the engine's running containers, leaving out
// layerprobe's own (labelled io.layerprobe.managed=true), with what inspect
// says about each. A container that goes away between the list and its
// inspection is skipped. env names the environment variables to report.
func (c *Client) Containers(ctx context.Context, env []string) ([]Container, error) {
	list, err := c.api.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("status", "running"),
	})
	if err != nil {
		return nil, c.fail("list containers", err)
	}
	out := make([]Container, 0, len(list.Items))
	for _, s := range list.Items {
		if s.Labels[LabelManaged] == "true" {
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
func containerOf(in container.InspectResponse, env []string) Container {
	ct := Container{ID: in.ID, Name: strings.TrimPrefix(in.Name, "/"), ImageID: in.Image, Driver: in.Driver}
	if in.Config != nil {
		ct.Image = in.Config.Image
		ct.Env = PickEnv(in.Config.Env, env)
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
		ct.Mounts = append(ct.Mounts, Mount{Type: string(m.Type), Name: m.Name, Source: m.Source,
			Destination: m.Destination, Driver: m.Driver, RW: m.RW})
	}
	return ct
}

// PickEnv keeps the variables named in names of a container's environment
// (KEY=value entries); nil when it has none of them. The rest is never
// copied: containers keep secrets there.
func PickEnv(environ, names []string) map[string]string {
	var out map[string]string
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(names, k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
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
