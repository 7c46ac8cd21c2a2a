package docker

import (
	"context"
	"errors"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// Sweep removes what layerprobe created on the engine and whose owner is no
// longer alive: containers (running or not, with their anonymous volumes),
// named volumes and, with includeImages, probe images no container uses.
// Everything is found by the io.layerprobe.managed=true label, never by
// name. alive == nil removes everything labelled. Sweep is idempotent: what
// vanishes meanwhile is skipped, and one failure does not stop the rest.
func (c *Client) Sweep(ctx context.Context, alive func(owner string) bool, includeImages bool) (engine.SweepReport, error) {
	return c.sweep(ctx, engine.DeadOwner(alive), includeImages)
}

// SweepStale is the sweep before a new probe session: it removes the
// containers and volumes of dead owners, as Sweep does, and also those that
// this very process (owner) created for the same engine name earlier. A
// process runs at most one session per engine, and a new one is prepared
// only when the old one is gone, so these can only be leftovers of a
// session whose removal failed: the engine was down (killed, restarting)
// when the agent closed it. Without this, every engine crash during a cycle
// would leak one probe container and volume for the agent's lifetime.
// Images are not touched.
func (c *Client) SweepStale(ctx context.Context, alive func(owner string) bool, owner, engineName string) (engine.SweepReport, error) {
	return c.sweep(ctx, engine.StaleOwner(alive, owner, engineName), false)
}

// sweep removes what is labelled managed and dead says may go.
func (c *Client) sweep(ctx context.Context, dead func(labels map[string]string) bool, includeImages bool) (engine.SweepReport, error) {
	rep := engine.SweepReport{Containers: []string{}, Volumes: []string{}, Images: []string{}}
	managed := func() client.Filters { return make(client.Filters).Add("label", engine.LabelManaged+"=true") }
	var errs []error

	ctrs, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: managed()})
	if err != nil {
		return rep, c.fail("sweep: list containers", err)
	}
	for _, ctr := range ctrs.Items {
		if !dead(ctr.Labels) {
			continue
		}
		_, err := c.api.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			rep.Containers = append(rep.Containers, containerName(ctr.Names, ctr.ID))
		case isNotFound(err):
		default:
			errs = append(errs, c.fail("sweep: remove container "+containerName(ctr.Names, ctr.ID), err))
		}
	}

	vols, err := c.api.VolumeList(ctx, client.VolumeListOptions{Filters: managed()})
	if err != nil {
		return rep, errors.Join(append(errs, c.fail("sweep: list volumes", err))...)
	}
	for _, v := range vols.Items {
		if !dead(v.Labels) {
			continue
		}
		_, err := c.api.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		switch {
		case err == nil:
			rep.Volumes = append(rep.Volumes, v.Name)
		case isNotFound(err):
		case cerrdefs.IsConflict(err):
			// In use by a container someone else still runs; it goes
			// with that container.
			c.logger.Info("sweep: volume in use, kept", "volume", v.Name)
		default:
			errs = append(errs, c.fail("sweep: remove volume "+v.Name, err))
		}
	}

	if includeImages {
		if err := c.sweepImages(ctx, dead, &rep); err != nil {
			errs = append(errs, err)
		}
	}
	if len(rep.Containers)+len(rep.Volumes)+len(rep.Images) > 0 {
		c.logger.Info("swept leftovers", "containers", len(rep.Containers), "volumes", len(rep.Volumes), "images", len(rep.Images))
	}
	return rep, errors.Join(errs...)
}

// sweepImages removes labelled images that no container (of anyone, ours
// or not) uses and whose owner is dead.
func (c *Client) sweepImages(ctx context.Context, dead func(map[string]string) bool, rep *engine.SweepReport) error {
	imgs, err := c.api.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("label", engine.LabelManaged+"=true"),
	})
	if err != nil {
		return c.fail("sweep: list images", err)
	}
	if len(imgs.Items) == 0 {
		return nil
	}
	all, err := c.api.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return c.fail("sweep: list containers", err)
	}
	used := map[string]bool{}
	for _, ctr := range all.Items {
		used[ctr.ImageID] = true
	}
	var errs []error
	for _, img := range imgs.Items {
		if used[img.ID] || !dead(img.Labels) {
			continue
		}
		name := img.ID
		if len(img.RepoTags) > 0 {
			name = img.RepoTags[0]
		}
		// Force: the image may carry several tags; no container uses it.
		_, err := c.api.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		switch {
		case err == nil:
			rep.Images = append(rep.Images, name)
		case isNotFound(err):
		case cerrdefs.IsConflict(err):
			c.logger.Info("sweep: image in use, kept", "image", name)
		default:
			errs = append(errs, c.fail("sweep: remove image "+name, err))
		}
	}
	return errors.Join(errs...)
}

func containerName(names []string, id string) string {
	if len(names) > 0 {
		return strings.TrimPrefix(names[0], "/")
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
