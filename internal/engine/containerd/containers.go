package containerd

import (
	"context"
	"fmt"
	"slices"

	ctd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// Containers lists the running containers of the client's namespace for the
// layer-write advisor, leaving out layerprobe's own (labelled
// io.layerprobe.managed=true). A container that goes away while it is read
// is skipped. env names the environment variables to report; the rest of a
// container's environment is never kept.
//
// containerd has no named volumes: every mount of a container is reported
// as its spec says it (bind mounts, which Kubernetes volumes are, and
// tmpfs).
func (c *Client) Containers(ctx context.Context, env []string) ([]engine.Container, error) {
	ctx = c.ns(ctx)
	list, err := c.api.Containers(ctx)
	if err != nil {
		return nil, c.fail("list containers", err)
	}
	out := make([]engine.Container, 0, len(list))
	for _, cont := range list {
		ct, ok, err := c.container(ctx, cont, env)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ct)
		}
	}
	return out, nil
}

// container reads what the advisor needs of one container; ok is false for
// one of layerprobe's own or one without a running task.
func (c *Client) container(ctx context.Context, cont ctd.Container, env []string) (ct engine.Container, ok bool, err error) {
	info, err := cont.Info(ctx, ctd.WithoutRefreshedMetadata)
	if err != nil {
		return ct, false, err
	}
	if info.Labels[engine.LabelManaged] == "true" {
		return ct, false, nil
	}
	task, err := cont.Task(ctx, nil)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return ct, false, nil // created, never started or already gone
		}
		return ct, false, c.fail("get the task of container "+shortID(info.ID), err)
	}
	st, err := task.Status(ctx)
	if err != nil {
		return ct, false, err
	}
	if st.Status != ctd.Running {
		return ct, false, nil
	}
	spec, err := specOf(info)
	if err != nil {
		return ct, false, err
	}
	ct = engine.Container{
		ID: info.ID, Name: info.ID, Image: info.Image, StartedAt: info.CreatedAt,
		Pid: int(task.Pid()), Driver: info.Snapshotter,
	}
	// The kubelet names its containers by label; the ID is a hash.
	if n := info.Labels["io.kubernetes.container.name"]; n != "" {
		ct.Name = n
		if pod := info.Labels["io.kubernetes.pod.name"]; pod != "" {
			ct.Name = pod + "/" + n
		}
	}
	if info.Image != "" {
		if img, err := c.api.ImageService().Get(ctx, info.Image); err == nil {
			ct.ImageID = img.Target.Digest.String()
		}
	}
	if info.SnapshotKey != "" && info.Snapshotter != "" {
		ct.UpperDir = c.upperDirOf(ctx, info.Snapshotter, info.SnapshotKey)
	}
	if spec.Process != nil {
		ct.Env = engine.PickEnv(spec.Process.Env, env)
	}
	for _, m := range spec.Mounts {
		typ := m.Type
		if slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind") {
			typ = "bind"
		}
		if typ != "bind" && typ != "tmpfs" {
			continue // proc, sysfs, devpts, mqueue, cgroup: not storage
		}
		ct.Mounts = append(ct.Mounts, engine.Mount{Type: typ, Source: m.Source, Destination: m.Destination,
			RW: !slices.Contains(m.Options, "ro")})
	}
	return ct, true, nil
}

// ContainerLayerSize is the snapshotter's own figure for the size of a
// container's writable layer: the usage of its active snapshot, which the
// snapshotter computes on request by walking it.
func (c *Client) ContainerLayerSize(ctx context.Context, id string) (int64, error) {
	ctx = c.ns(ctx)
	info, err := c.api.ContainerService().Get(ctx, id)
	if err != nil {
		return 0, c.fail("inspect container "+shortID(id), err)
	}
	if info.SnapshotKey == "" || info.Snapshotter == "" {
		return 0, fmt.Errorf("engine %s: container %s has no snapshot", c.name, shortID(id))
	}
	u, err := c.api.SnapshotService(info.Snapshotter).Usage(ctx, info.SnapshotKey)
	if err != nil {
		return 0, c.fail("get the snapshot usage of container "+shortID(id), err)
	}
	return u.Size, nil
}

// specOf decodes the OCI runtime spec of a container's record.
func specOf(info containers.Container) (*oci.Spec, error) {
	if info.Spec == nil {
		return nil, fmt.Errorf("container %s has no spec", shortID(info.ID))
	}
	var s oci.Spec
	if err := typeurl.UnmarshalTo(info.Spec, &s); err != nil {
		return nil, fmt.Errorf("read the spec of container %s: %w", shortID(info.ID), err)
	}
	return &s, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
