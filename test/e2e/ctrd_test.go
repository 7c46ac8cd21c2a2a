package e2e

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	ctd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/typeurl/v2"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// ctrd is a containerd client of the test's own, on containerd's v2
// client, so the checks do not depend on layerprobe's engine code.
type ctrd struct {
	api *ctd.Client
	ctx context.Context // carries the namespace
}

func newCtrd(t *testing.T, d *testdaemon.Daemon) *ctrd {
	t.Helper()
	api, err := ctd.New(strings.TrimPrefix(d.Host, "unix://"), ctd.WithDefaultNamespace(ctrdNamespace))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Close() })
	return &ctrd{api: api, ctx: namespaces.WithNamespace(context.Background(), ctrdNamespace)}
}

// ctrdObjects lists objects of one kind or another by name.
type ctrdObjects struct {
	containers, tasks, snapshots, images, leases, ingests []string
}

func (o ctrdObjects) empty() bool {
	return len(o.containers)+len(o.tasks)+len(o.snapshots)+len(o.images)+len(o.leases)+len(o.ingests) == 0
}

const managedFilter = `labels."io.layerprobe.managed"==true`

// labelled lists what carries layerprobe's label in the namespace, the
// tasks of those containers, and content ingests layerprobe started.
func (c *ctrd) labelled(t *testing.T, snapshotter string) ctrdObjects {
	t.Helper()
	var o ctrdObjects
	ctrs, err := c.api.Containers(c.ctx, managedFilter)
	must(t, err)
	for _, ct := range ctrs {
		o.containers = append(o.containers, ct.ID())
		if _, err := ct.Task(c.ctx, nil); err == nil {
			o.tasks = append(o.tasks, ct.ID())
		}
	}
	o.snapshots = c.snapshots(t, snapshotter, managedFilter)
	imgs, err := c.api.ImageService().List(c.ctx, managedFilter)
	must(t, err)
	for _, i := range imgs {
		o.images = append(o.images, i.Name)
	}
	ls, err := c.api.LeasesService().List(c.ctx, managedFilter)
	must(t, err)
	for _, l := range ls {
		o.leases = append(o.leases, l.ID)
	}
	sts, err := c.api.ContentStore().ListStatuses(c.ctx)
	must(t, err)
	for _, s := range sts {
		if strings.HasPrefix(s.Ref, "layerprobe-") {
			o.ingests = append(o.ingests, s.Ref)
		}
	}
	return o
}

// snapshots lists the names of the snapshots that match filters.
func (c *ctrd) snapshots(t *testing.T, snapshotter string, filters ...string) []string {
	t.Helper()
	var names []string
	must(t, c.api.SnapshotService(snapshotter).Walk(c.ctx, func(_ context.Context, i snapshots.Info) error {
		names = append(names, i.Name)
		return nil
	}, filters...))
	return names
}

func (c *ctrd) snapshotNames(t *testing.T, snapshotter string) []string {
	t.Helper()
	names := c.snapshots(t, snapshotter)
	slices.Sort(names)
	return names
}

// foreignObjects are what "someone else" made in the namespace.
type foreignObjects struct {
	container, image, lease, snapshot, blob string
}

// makeForeign creates a container record, an image, a lease, an active
// snapshot and a content blob that are not layerprobe's, some carrying
// labels of their own and one a layerprobe-looking name, as a kubelet's
// objects would share the namespace.
func (c *ctrd) makeForeign(t *testing.T, snapshotter string) foreignObjects {
	t.Helper()
	f := foreignObjects{container: "layerprobe-probe-kubelet", image: "registry.example/app:1", lease: "kubelet-lease", snapshot: "kubelet-snap"}
	_, err := c.api.LeasesService().Create(c.ctx, leases.WithID(f.lease), leases.WithLabels(map[string]string{"io.layerprobe.managed": "false"}))
	must(t, err)
	lctx := leases.WithLease(c.ctx, f.lease)
	blob := []byte(`{"app":"someone else's"}`)
	desc := ocispec.Descriptor{MediaType: "application/json", Digest: digest.FromBytes(blob), Size: int64(len(blob))}
	f.blob = desc.Digest.String()
	must(t, content.WriteBlob(lctx, c.api.ContentStore(), "kubelet-blob", bytes.NewReader(blob), desc))
	_, err = c.api.ImageService().Create(lctx, images.Image{Name: f.image, Target: desc,
		Labels: map[string]string{"io.cri-containerd.image": "managed"}})
	must(t, err)
	_, err = c.api.SnapshotService(snapshotter).Prepare(lctx, f.snapshot, "", snapshots.WithLabels(map[string]string{"owner": "kubelet"}))
	must(t, err)
	spec, err := typeurl.MarshalAny(&specs.Spec{Version: "1.0.2"})
	must(t, err)
	_, err = c.api.ContainerService().Create(c.ctx, containers.Container{
		ID: f.container, Image: f.image, Snapshotter: snapshotter, SnapshotKey: f.snapshot,
		Runtime: containers.RuntimeInfo{Name: "io.containerd.runc.v2"},
		Spec:    spec,
		Labels:  map[string]string{"io.kubernetes.pod.name": "app"},
	})
	must(t, err)
	return f
}

func (c *ctrd) checkForeign(t *testing.T, f foreignObjects) {
	t.Helper()
	if _, err := c.api.ContainerService().Get(c.ctx, f.container); err != nil {
		t.Errorf("foreign container %s: %v", f.container, err)
	}
	if _, err := c.api.ImageService().Get(c.ctx, f.image); err != nil {
		t.Errorf("foreign image %s: %v", f.image, err)
	}
	if _, err := c.api.SnapshotService("overlayfs").Stat(c.ctx, f.snapshot); err != nil {
		t.Errorf("foreign snapshot %s: %v", f.snapshot, err)
	}
	if _, err := c.api.ContentStore().Info(c.ctx, digest.Digest(f.blob)); err != nil {
		t.Errorf("foreign blob %s: %v", f.blob, err)
	}
	ls, err := c.api.LeasesService().List(c.ctx, "id=="+f.lease)
	if err != nil || len(ls) != 1 {
		t.Errorf("foreign lease %s: %v, %d found", f.lease, err, len(ls))
	}
}
