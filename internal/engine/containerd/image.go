package containerd

import (
	"bytes"
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

	ctd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
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
// as an OCI image of its layers and unpacked. Nothing is ever pulled. The
// import runs under a labelled lease, so a process killed half way leaves
// nothing a sweep (or containerd's garbage collector, once the lease
// expires) would not remove.
func (c *Client) EnsureImage(ctx context.Context, im *probeimage.Image, owner string) (string, error) {
	if im == nil || len(im.Digest) < 12 || !ownerRE.MatchString(im.Digest) {
		return "", errors.New("ensure probe image: image has no valid digest")
	}
	if owner == "" || !ownerRE.MatchString(owner) {
		return "", fmt.Errorf("ensure probe image: owner %q is not a valid owner token", owner)
	}
	ctx = c.ns(ctx)
	ref := engine.ImageRepository + ":" + im.Digest[:12]
	is := c.api.ImageService()

	existing, err := is.List(ctx, labelFilter(engine.LabelDigest, im.Digest))
	if err != nil {
		return "", c.fail("list probe images", err)
	}
	lctx, done, err := c.tempLease(ctx, owner)
	if err != nil {
		return "", err
	}
	defer done()
	for _, img := range existing {
		if img.Name == ref {
			if err := c.unpack(lctx, img, owner); err != nil {
				return "", err
			}
			c.logger.Debug("reusing probe image", "image", ref)
			return ref, nil
		}
	}

	labels := c.labels(owner, "image", "")
	labels[engine.LabelDigest] = im.Digest
	target, err := c.writeImage(lctx, im, owner, labels)
	if err != nil {
		return "", err
	}
	img, err := is.Create(lctx, images.Image{Name: ref, Target: target, Labels: labels})
	if errdefs.IsAlreadyExists(err) {
		// Another layerprobe process imported the same image meanwhile.
		img, err = is.Get(lctx, ref)
	}
	if err != nil {
		return "", c.fail("create probe image", err)
	}
	if err := c.unpack(lctx, img, owner); err != nil {
		return "", err
	}
	c.logger.Info("imported probe image", "image", ref, "bytes", im.Size())
	return ref, nil
}

// tempLease creates a lease that keeps what is made under the returned
// context from the garbage collector until done deletes it. It expires by
// itself after importLease and carries layerprobe's labels (role import),
// so that a process killed half way leaves nothing a sweep or containerd
// would not remove. The client's own calls (unpacking, creating a
// container) take this lease instead of making one of their own, which
// would carry no label and last a day.
func (c *Client) tempLease(ctx context.Context, owner string) (lctx context.Context, done func(), err error) {
	ls := c.api.LeasesService()
	l, err := ls.Create(ctx, leases.WithID(randomID()+"-layerprobe"), leases.WithExpiration(importLease),
		leases.WithLabels(c.labels(owner, roleImport, "")))
	if err != nil {
		return nil, nil, c.fail("create import lease", err)
	}
	return leases.WithLease(ctx, l.ID), func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := ls.Delete(dctx, l); err != nil && !errdefs.IsNotFound(err) {
			c.logger.Warn("delete import lease", "lease", l.ID, "err", err)
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
	cs := c.api.ContentStore()
	// The garbage collector follows these labels from the manifest (which
	// the image record holds) to the config and the layers.
	refs := map[string]string{}
	var layers []ocispec.Descriptor
	var diffIDs []string
	for i := range im.Layers() {
		layer, err := c.writeLayer(ctx, cs, im, i, owner)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		layers = append(layers, layer)
		// Uncompressed: a layer's digest is its diff ID.
		diffIDs = append(diffIDs, layer.Digest.Encoded())
		refs[fmt.Sprintf("containerd.io/gc.ref.content.l.%d", i)] = layer.Digest.String()
	}
	cfg := probeimage.Config(labels, diffIDs)
	cfgDesc, err := c.writeJSON(ctx, cs, ocispec.MediaTypeImageConfig, cfg, owner, nil)
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
	return c.writeJSON(ctx, cs, ocispec.MediaTypeImageManifest, manifest, owner, refs)
}

// writeLayer streams layer i of im as a tar into the content store. Its
// digest is known only once it is written, so it is committed with the
// digest the store computed on the way.
func (c *Client) writeLayer(ctx context.Context, cs content.Store, im *probeimage.Image, i int, owner string) (ocispec.Descriptor, error) {
	w, err := content.OpenWriter(ctx, cs, content.WithRef(fmt.Sprintf("%s%s-layer-%s.%d", ingestPrefix, owner, im.Digest[:12], i)))
	if err != nil {
		return ocispec.Descriptor{}, c.fail("open content writer", err)
	}
	defer w.Close()
	// Start from zero, whatever a killed import of the same owner left in
	// the ingest.
	if err := w.Truncate(0); err != nil {
		return ocispec.Descriptor{}, c.fail("reset content writer", err)
	}
	n, err := im.WriteLayer(w, i)
	if err != nil {
		if u := c.reach.Unreachable(err); u != nil {
			return ocispec.Descriptor{}, fmt.Errorf("import probe image: %w", u)
		}
		return ocispec.Descriptor{}, fmt.Errorf("import probe image: %w", err)
	}
	desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: w.Digest(), Size: n}
	if err := w.Commit(ctx, n, desc.Digest); err != nil && !errdefs.IsAlreadyExists(err) {
		return ocispec.Descriptor{}, c.fail("commit probe image layer", err)
	}
	return desc, nil
}

// writeJSON writes v as one blob, with labels.
func (c *Client) writeJSON(ctx context.Context, cs content.Store, mediaType string, v any, owner string, labels map[string]string) (ocispec.Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("import probe image: %w", err)
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	ref := ingestPrefix + owner + "-" + desc.Digest.Encoded()[:12]
	if err := content.WriteBlob(ctx, cs, ref, bytes.NewReader(b), desc, content.WithLabels(labels)); err != nil {
		return ocispec.Descriptor{}, c.fail("write "+mediaType, err)
	}
	return desc, nil
}

// unpack unpacks img on the configured snapshotter unless it is already.
// The layer snapshots carry layerprobe's labels when owner is set (a
// user-named image's do not). ctx carries a lease.
func (c *Client) unpack(ctx context.Context, img images.Image, owner string) error {
	i := ctd.NewImage(c.api, img)
	ok, err := i.IsUnpacked(ctx, c.snapshotter)
	if err != nil {
		return c.fail("check probe image "+img.Name, err)
	}
	if ok {
		return nil
	}
	var opts []ctd.UnpackOpt
	if owner != "" {
		labels := c.labels(owner, roleLayer, "")
		opts = append(opts, func(_ context.Context, uc *ctd.UnpackConfig) error {
			uc.SnapshotOpts = append(uc.SnapshotOpts, snapshots.WithLabels(labels))
			return nil
		})
	}
	if err := i.Unpack(ctx, c.snapshotter, opts...); err != nil {
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
	img, err := c.api.ImageService().Get(ctx, ref)
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("check probe image: %q is not present in namespace %s of engine %s and layerprobe never pulls; import it yourself (ctr -n %s images import): %w",
			ref, c.namespace, c.name, c.namespace, engine.ErrImageNotFound)
	}
	if err != nil {
		return c.fail("check probe image", err)
	}
	// The user's image is not layerprobe's: its layers get no labels, and
	// the lease that holds them while they are unpacked is not owned.
	lctx, done, err := c.tempLease(ctx, "check")
	if err != nil {
		return err
	}
	defer done()
	return c.unpack(lctx, img, "")
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
