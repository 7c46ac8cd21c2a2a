package containerd

import (
	"context"
	"errors"
	"slices"

	ctd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/image-spec/identity"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// Sweep removes what layerprobe created in the namespace and whose owner is
// no longer alive: probe containers with their tasks and snapshots, import
// leases and unfinished content ingests and, with includeImages, probe
// images no container uses, with their layer snapshots. Everything is found
// by the io.layerprobe.managed=true label (ingests by the owner token in
// their reference), never by name: a kubelet shares the namespace, and
// nothing of its is looked at twice. alive == nil removes everything
// labelled. What vanishes meanwhile is skipped; one failure does not stop
// the rest.
func (c *Client) Sweep(ctx context.Context, alive func(owner string) bool, includeImages bool) (engine.SweepReport, error) {
	return c.sweep(ctx, engine.DeadOwner(alive), alive, includeImages)
}

// SweepStale is the sweep before a new probe session: as Sweep without
// images, and also the probes this very process (owner) created for the
// same engine name, which can only be leftovers of a session that could
// not be closed while containerd was down.
func (c *Client) SweepStale(ctx context.Context, alive func(owner string) bool, owner, engineName string) (engine.SweepReport, error) {
	return c.sweep(ctx, engine.StaleOwner(alive, owner, engineName), alive, false)
}

func (c *Client) sweep(ctx context.Context, dead func(map[string]string) bool, alive func(string) bool, includeImages bool) (engine.SweepReport, error) {
	ctx = c.ns(ctx)
	rep := engine.SweepReport{Containers: []string{}, Volumes: []string{}, Images: []string{}}
	var errs []error

	ctrs, err := c.api.ContainerService().List(ctx, managedFilter)
	if err != nil {
		return rep, c.fail("sweep: list containers", err)
	}
	for _, ctr := range ctrs {
		if !dead(ctr.Labels) {
			continue
		}
		if err := c.removeContainer(ctx, ctr.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Containers = append(rep.Containers, ctr.ID)
	}

	if includeImages {
		if err := c.sweepImages(ctx, dead, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.sweepLeases(ctx, dead, &rep); err != nil {
		errs = append(errs, err)
	}
	if err := c.sweepSnapshots(ctx, dead, &rep); err != nil {
		errs = append(errs, err)
	}
	if err := c.sweepIngests(ctx, alive); err != nil {
		errs = append(errs, err)
	}
	if len(rep.Containers)+len(rep.Images)+len(rep.Snapshots)+len(rep.Leases) > 0 {
		c.logger.Info("swept leftovers", "containers", len(rep.Containers), "images", len(rep.Images),
			"snapshots", len(rep.Snapshots), "leases", len(rep.Leases))
	}
	return rep, errors.Join(errs...)
}

// sweepImages removes labelled images whose owner is dead and that no
// container of the namespace (anyone's) was created from. The deletion is
// synchronous: containerd's garbage collector removes the image's content
// and layer snapshot before it returns.
func (c *Client) sweepImages(ctx context.Context, dead func(map[string]string) bool, rep *engine.SweepReport) error {
	is := c.api.ImageService()
	imgs, err := is.List(ctx, managedFilter)
	if err != nil {
		return c.fail("sweep: list images", err)
	}
	if len(imgs) == 0 {
		return nil
	}
	all, err := c.api.ContainerService().List(ctx)
	if err != nil {
		return c.fail("sweep: list containers", err)
	}
	used := map[string]bool{}
	for _, ctr := range all {
		used[ctr.Image] = true
	}
	var errs []error
	for _, img := range imgs {
		if used[img.Name] || !dead(img.Labels) {
			continue
		}
		err := is.Delete(ctx, img.Name, images.SynchronousDelete())
		switch {
		case err == nil:
			rep.Images = append(rep.Images, img.Name)
		case errdefs.IsNotFound(err):
		default:
			errs = append(errs, c.fail("sweep: remove image "+img.Name, err))
		}
	}
	return errors.Join(errs...)
}

// sweepLeases removes the import leases of dead owners: what only they
// held (an import's content) goes with the next garbage collection.
func (c *Client) sweepLeases(ctx context.Context, dead func(map[string]string) bool, rep *engine.SweepReport) error {
	ls, err := c.api.LeasesService().List(ctx, managedFilter)
	if err != nil {
		return c.fail("sweep: list leases", err)
	}
	var errs []error
	for _, l := range ls {
		if !dead(l.Labels) {
			continue
		}
		err := c.api.LeasesService().Delete(ctx, l, leases.SynchronousDelete)
		switch {
		case err == nil:
			rep.Leases = append(rep.Leases, l.ID)
		case errdefs.IsNotFound(err):
		default:
			errs = append(errs, c.fail("sweep: remove lease "+l.ID, err))
		}
	}
	return errors.Join(errs...)
}

// sweepSnapshots removes labelled snapshots that outlived what they were
// made for: a probe's snapshot whose container is gone (a process killed
// between the two) and whose owner is dead, and an image layer no
// layerprobe image refers to any more. A layer is shared by every process
// that uses the same probe image, so its owner does not matter.
func (c *Client) sweepSnapshots(ctx context.Context, dead func(map[string]string) bool, rep *engine.SweepReport) error {
	sn := c.api.SnapshotService(c.snapshotter)
	var found []snapshots.Info
	err := sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		found = append(found, info)
		return nil
	}, managedFilter)
	if err != nil {
		return c.fail("sweep: list snapshots", err)
	}
	if len(found) == 0 {
		return nil
	}
	inUse, err := c.imageLayers(ctx)
	if err != nil {
		return err
	}
	ctrs, err := c.api.ContainerService().List(ctx)
	if err != nil {
		return c.fail("sweep: list containers", err)
	}
	// Children first: a parent cannot go while a child exists.
	slices.SortFunc(found, func(a, b snapshots.Info) int {
		if a.Kind == b.Kind {
			return 0
		}
		if a.Kind == snapshots.KindCommitted {
			return 1
		}
		return -1
	})
	var errs []error
	for _, info := range found {
		switch info.Labels[engine.LabelRole] {
		case roleLayer:
			if inUse[info.Name] {
				continue
			}
		default:
			if !dead(info.Labels) || slices.ContainsFunc(ctrs, func(ct containers.Container) bool {
				return ct.SnapshotKey == info.Name && ct.Snapshotter == c.snapshotter
			}) {
				continue
			}
		}
		err := sn.Remove(ctx, info.Name)
		switch {
		case err == nil:
			rep.Snapshots = append(rep.Snapshots, info.Name)
		case errdefs.IsNotFound(err):
		case errdefs.IsFailedPrecondition(err):
			// Still the parent of a snapshot someone else made.
			c.logger.Info("sweep: snapshot in use, kept", "snapshot", info.Name)
		default:
			errs = append(errs, c.fail("sweep: remove snapshot "+info.Name, err))
		}
	}
	return errors.Join(errs...)
}

// imageLayers returns the chain IDs of the layers of every layerprobe image
// left in the namespace: the layer snapshots that must stay.
func (c *Client) imageLayers(ctx context.Context) (map[string]bool, error) {
	imgs, err := c.api.ImageService().List(ctx, managedFilter)
	if err != nil {
		return nil, c.fail("sweep: list images", err)
	}
	out := map[string]bool{}
	for _, img := range imgs {
		diffIDs, err := ctd.NewImage(c.api, img).RootFS(ctx)
		if err != nil {
			// Content already gone: nothing can be unpacked from it.
			continue
		}
		for i := range diffIDs {
			out[identity.ChainID(diffIDs[:i+1]).String()] = true
		}
	}
	return out, nil
}

// sweepIngests aborts unfinished content uploads of dead owners (an import
// killed half way).
func (c *Client) sweepIngests(ctx context.Context, alive func(string) bool) error {
	cs := c.api.ContentStore()
	sts, err := cs.ListStatuses(ctx)
	if err != nil {
		return c.fail("sweep: list content ingests", err)
	}
	var errs []error
	for _, st := range sts {
		owner := ownerOfIngest(st.Ref)
		if owner == "" || (alive != nil && alive(owner)) {
			continue
		}
		if err := cs.Abort(ctx, st.Ref); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, c.fail("sweep: abort content ingest "+st.Ref, err))
		}
	}
	return errors.Join(errs...)
}
