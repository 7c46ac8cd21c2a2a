package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// Roles of what layerprobe creates in containerd besides probes and
// images (engine.LabelRole).
const (
	roleImport = "import" // a lease that protects an import or a creation in progress
	roleLayer  = "layer"  // the probe image's unpacked layer snapshot
)

// importLease bounds how long content of an import that nobody finished
// survives when no sweep runs: containerd drops an expired lease itself.
const importLease = time.Hour

// ingestPrefix starts the content-ingest references of an import; the
// owner token follows, so a sweep can abort a killed import's partial
// upload without knowing anything but its owner.
const ingestPrefix = "layerprobe-"

var ownerRE = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// EnsureImage makes the probe image im available in the namespace, unpacked
// on the configured snapshotter, and returns its name,
// layerprobe-probe:<digest[:12]>. An image labelled with im's digest is
// reused; otherwise the root file system is written into the content store
// as an OCI image of its layers and unpacked. Nothing is ever pulled. The import
// runs under a labelled lease, so a process killed half way leaves nothing
// a sweep (or containerd's garbage collector, once the lease expires)
// would not remove.
func (c *Client) EnsureImage(ctx context.Context, im *probeimage.Image, owner string) (string, error) {
	if im == nil || len(im.Digest) < 12 || !ownerRE.MatchString(im.Digest) {
		return "", errors.New("ensure probe image: image has no valid digest")
	}
	if owner == "" || !ownerRE.MatchString(owner) {
		return "", fmt.Errorf("ensure probe image: owner %q is not a valid owner token", owner)
	}
	ctx = c.ns(ctx)
	ref := engine.ImageRepository + ":" + im.Digest[:12]

	existing, err := c.images.List(ctx, &imagesapi.ListImagesRequest{Filters: []string{labelFilter(engine.LabelDigest, im.Digest)}})
	if err != nil {
		return "", c.fail("list probe images", native(err))
	}
	for _, img := range existing.Images {
		if img.Name == ref {
			lctx, done, err := c.tempLease(ctx, owner)
			if err != nil {
				return "", err
			}
			err = c.unpackImage(lctx, img, owner)
			done()
			if err != nil {
				return "", err
			}
			c.logger.Debug("reusing probe image", "image", ref)
			return ref, nil
		}
	}

	lctx, done, err := c.tempLease(ctx, owner)
	if err != nil {
		return "", err
	}
	defer done()

	labels := c.labels(owner, "image", "")
	labels[engine.LabelDigest] = im.Digest
	target, err := c.writeImage(lctx, im, owner, labels)
	if err != nil {
		return "", err
	}
	created, err := c.images.Create(lctx, &imagesapi.CreateImageRequest{Image: &imagesapi.Image{Name: ref, Target: &types.Descriptor{
		MediaType: target.MediaType, Digest: target.Digest.String(), Size: target.Size}, Labels: labels}})
	img := created.GetImage()
	if err = native(err); errdefs.IsAlreadyExists(err) {
		// Another layerprobe process imported the same image meanwhile.
		var got *imagesapi.GetImageResponse
		got, err = c.images.Get(lctx, &imagesapi.GetImageRequest{Name: ref})
		img, err = got.GetImage(), native(err)
	}
	if err != nil {
		return "", c.fail("create probe image", err)
	}
	if err := c.unpackImage(lctx, img, owner); err != nil {
		return "", err
	}
	c.logger.Info("imported probe image", "image", ref, "bytes", im.Size())
	return ref, nil
}

// tempLease creates a lease that keeps what is made under the returned
// context from the garbage collector until done deletes it. It expires by
// itself after importLease, and carries layerprobe's labels (role import),
// so that a process killed half way leaves nothing a sweep or containerd
// would not remove.
func (c *Client) tempLease(ctx context.Context, owner string) (lctx context.Context, done func(), err error) {
	labels := c.labels(owner, roleImport, "")
	labels["containerd.io/gc.expire"] = time.Now().Add(importLease).Format(time.RFC3339)
	l, err := c.leases.Create(ctx, &leasesapi.CreateRequest{ID: randomID() + "-layerprobe", Labels: labels})
	if err != nil {
		return nil, nil, c.fail("create import lease", native(err))
	}
	id := l.Lease.ID
	return withLease(ctx, id), func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, err := c.leases.Delete(dctx, &leasesapi.DeleteRequest{ID: id}); err != nil && !errdefs.IsNotFound(native(err)) {
			c.logger.Warn("delete import lease", "lease", id, "err", err)
		}
	}, nil
}

// randomID is 16 random hex digits.
func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// writeImage writes im's layers, an image config and a manifest into the
// content store and returns the manifest's descriptor.
func (c *Client) writeImage(ctx context.Context, im *probeimage.Image, owner string, labels map[string]string) (ocispec.Descriptor, error) {
	// The garbage collector follows these labels from the manifest (which
	// the image record holds) to the config and the layers.
	refs := map[string]string{}
	var layers []ocispec.Descriptor
	var diffIDs []string
	for i := range im.Layers() {
		layer, err := c.writeLayer(ctx, im, i, owner)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		layers = append(layers, layer)
		// Uncompressed: a layer's digest is its diff ID.
		diffIDs = append(diffIDs, layer.Digest.Encoded())
		refs[fmt.Sprintf("containerd.io/gc.ref.content.l.%d", i)] = layer.Digest.String()
	}
	cfg := probeimage.Config(labels, diffIDs)
	cfgDesc, err := c.writeJSON(ctx, ocispec.MediaTypeImageConfig, cfg, owner, nil)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	manifest := ocispec.Manifest{
		Versioned: ocispecs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfgDesc,
		Layers:    layers,
	}
	refs["containerd.io/gc.ref.content.config"] = cfgDesc.Digest.String()
	return c.writeJSON(ctx, ocispec.MediaTypeImageManifest, manifest, owner, refs)
}

// writeLayer streams layer i of im as a tar into the content store. Its
// digest is known only once it is written, so it is committed with the
// digest computed on the way.
func (c *Client) writeLayer(ctx context.Context, im *probeimage.Image, i int, owner string) (ocispec.Descriptor, error) {
	w, err := c.openBlob(ctx, fmt.Sprintf("%s%s-layer-%s.%d", ingestPrefix, owner, im.Digest[:12], i))
	if err != nil {
		return ocispec.Descriptor{}, c.fail("open content writer", err)
	}
	defer w.close()
	if err := im.WriteLayer(w, i); err != nil {
		if u := c.asUnreachable(err); u != nil {
			return ocispec.Descriptor{}, fmt.Errorf("import probe image: %w", u)
		}
		return ocispec.Descriptor{}, fmt.Errorf("import probe image: %w", err)
	}
	desc, err := w.commit(nil)
	if err != nil {
		return ocispec.Descriptor{}, c.fail("commit probe image layer", err)
	}
	desc.MediaType = ocispec.MediaTypeImageLayer
	return desc, nil
}

func (c *Client) writeJSON(ctx context.Context, mediaType string, v any, owner string, labels map[string]string) (ocispec.Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("import probe image: %w", err)
	}
	ref := ingestPrefix + owner + "-" + digest.FromBytes(b).Encoded()[:12]
	desc, err := c.writeBlob(ctx, ref, b, labels)
	if err != nil {
		return ocispec.Descriptor{}, c.fail("write "+mediaType, err)
	}
	desc.MediaType = mediaType
	return desc, nil
}

// unpackImage unpacks img on the configured snapshotter unless it is
// already; the layer snapshot carries layerprobe's labels. ctx carries a
// lease.
func (c *Client) unpackImage(ctx context.Context, img *imagesapi.Image, owner string) error {
	i, err := c.resolveImage(ctx, img.Target)
	if err != nil {
		return c.fail("read probe image "+img.Name, err)
	}
	ok, err := c.isUnpacked(ctx, i, c.snapshotter)
	if err != nil {
		return c.fail("check probe image "+img.Name, err)
	}
	if ok {
		return nil
	}
	var labels map[string]string
	if owner != "" {
		labels = c.labels(owner, roleLayer, "")
	}
	if err := c.unpack(ctx, i, c.snapshotter, labels); err != nil {
		return c.fail("unpack probe image "+img.Name+" on snapshotter "+c.snapshotter, err)
	}
	return nil
}

// CheckImage checks that a user-named probe image exists in the namespace
// and unpacks it on the snapshotter if needed (from what is already in the
// content store). It never pulls: a missing image is an error wrapping
// engine.ErrImageNotFound.
func (c *Client) CheckImage(ctx context.Context, ref string) error {
	if ref == "" {
		return errors.New("check probe image: empty image reference")
	}
	ctx = c.ns(ctx)
	got, err := c.images.Get(ctx, &imagesapi.GetImageRequest{Name: ref})
	if err = native(err); errdefs.IsNotFound(err) {
		return fmt.Errorf("check probe image: %q is not present in namespace %s of engine %s and layerprobe never pulls; import it yourself (ctr -n %s images import): %w",
			ref, c.namespace, c.name, c.namespace, engine.ErrImageNotFound)
	}
	if err != nil {
		return c.fail("check probe image", err)
	}
	i, err := c.resolveImage(ctx, got.Image.Target)
	if err != nil {
		return c.fail("read probe image "+ref, err)
	}
	ok, err := c.isUnpacked(ctx, i, c.snapshotter)
	if err != nil {
		return c.fail("check probe image "+ref, err)
	}
	if ok {
		return nil
	}
	// The user's image is not layerprobe's: its layers get no labels, and
	// the lease that holds them while they are unpacked is not owned.
	lctx, done, err := c.tempLease(ctx, "check")
	if err != nil {
		return err
	}
	defer done()
	if err := c.unpack(lctx, i, c.snapshotter, nil); err != nil {
		return c.fail("unpack probe image "+ref+" on snapshotter "+c.snapshotter, err)
	}
	return nil
}

// labels are what layerprobe puts on everything it creates; engineName ""
// leaves the engine label out (images and layers serve every engine of a
// namespace).
func (c *Client) labels(owner, role, engineName string) map[string]string {
	l := map[string]string{
		engine.LabelManaged: "true",
		engine.LabelRole:    role,
		engine.LabelOwner:   owner,
	}
	if engineName != "" {
		l[engine.LabelEngine] = engineName
	}
	return l
}

// labelFilter is a containerd filter matching a label's value.
func labelFilter(key, value string) string {
	return fmt.Sprintf("labels.%q==%s", key, value)
}

// managedFilter matches what layerprobe created.
var managedFilter = labelFilter(engine.LabelManaged, "true")

// withLabels returns a copy of base with extra's keys that base lacks.
func withLabels(base, extra map[string]string) map[string]string {
	out := maps.Clone(extra)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, base)
	return out
}

// ownerOfIngest returns the owner token in an ingest reference made by
// writeLayer or writeJSON, or "".
func ownerOfIngest(ref string) string {
	rest, ok := strings.CutPrefix(ref, ingestPrefix)
	if !ok {
		return ""
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return ""
	}
	rest = rest[:i]
	rest = strings.TrimSuffix(rest, "-layer")
	return rest
}
