package containerd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	goruntime "runtime"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	diffapi "github.com/containerd/containerd/api/services/diff/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// writeChunk bounds one message of a content upload, well below
// containerd's message limit.
const writeChunk = 1 << 20

// readBlob reads a small blob (a manifest, an index, a config) from the
// content store.
func (c *Client) readBlob(ctx context.Context, dgst string) ([]byte, error) {
	stream, err := c.content.Read(ctx, &contentapi.ReadContentRequest{Digest: dgst})
	if err != nil {
		return nil, native(err)
	}
	var b bytes.Buffer
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return b.Bytes(), nil
		}
		if err != nil {
			return nil, native(err)
		}
		if b.Len()+len(resp.Data) > maxMsgSize {
			return nil, fmt.Errorf("blob %s is larger than %d bytes", dgst, maxMsgSize)
		}
		b.Write(resp.Data)
	}
}

// readJSON reads the blob dgst (an image's what) into v.
func (c *Client) readJSON(ctx context.Context, what, dgst string, v any) error {
	b, err := c.readBlob(ctx, dgst)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return fmt.Errorf("read %s %s: %w", what, dgst, err)
	}
	return nil
}

// blobWriter is one upload into the content store under a reference: the
// data is sent in order from offset 0 (which starts the ingest anew,
// whatever it held) and committed under the digest computed here.
type blobWriter struct {
	stream contentapi.Content_WriteClient
	ref    string
	offset int64
	h      hash.Hash
}

func (c *Client) openBlob(ctx context.Context, ref string) (*blobWriter, error) {
	stream, err := c.content.Write(ctx)
	if err != nil {
		return nil, native(err)
	}
	return &blobWriter{stream: stream, ref: ref, h: sha256.New()}, nil
}

func (w *blobWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), writeChunk)]
		err := w.stream.Send(&contentapi.WriteContentRequest{Action: contentapi.WriteAction_WRITE, Ref: w.ref, Offset: w.offset, Data: chunk})
		if err == nil {
			_, err = w.stream.Recv()
		}
		if err != nil {
			return n, native(err)
		}
		w.h.Write(chunk)
		w.offset += int64(len(chunk))
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// digest is the digest of what was written.
func (w *blobWriter) digest() digest.Digest {
	return digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(w.h.Sum(nil)))
}

// commit makes the upload a blob with the given labels. A blob that is
// already there is not an error.
func (w *blobWriter) commit(labels map[string]string) (ocispec.Descriptor, error) {
	d := w.digest()
	err := w.stream.Send(&contentapi.WriteContentRequest{Action: contentapi.WriteAction_COMMIT, Ref: w.ref,
		Total: w.offset, Offset: w.offset, Expected: d.String(), Labels: labels})
	if err == nil {
		_, err = w.stream.Recv()
	}
	_ = w.stream.CloseSend()
	if err = native(err); err != nil && !errdefs.IsAlreadyExists(err) {
		return ocispec.Descriptor{}, err
	}
	return ocispec.Descriptor{Digest: d, Size: w.offset}, nil
}

func (w *blobWriter) close() { _ = w.stream.CloseSend() }

// writeBlob uploads b as one blob.
func (c *Client) writeBlob(ctx context.Context, ref string, b []byte, labels map[string]string) (ocispec.Descriptor, error) {
	w, err := c.openBlob(ctx, ref)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer w.close()
	if _, err := w.Write(b); err != nil {
		return ocispec.Descriptor{}, err
	}
	return w.commit(labels)
}

// image is what unpacking and running an image needs of it: the config's
// descriptor, its layers and their uncompressed digests.
type image struct {
	config  ocispec.Descriptor
	layers  []ocispec.Descriptor
	diffIDs []digest.Digest
}

// Media types of Docker's image format, which containerd stores as is.
const (
	dockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
	dockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
)

// resolveImage reads an image's manifest (this platform's, from an index)
// and config.
func (c *Client) resolveImage(ctx context.Context, target *types.Descriptor) (*image, error) {
	if target == nil {
		return nil, errors.New("image has no target")
	}
	mt, dgst := target.MediaType, target.Digest
	if mt == ocispec.MediaTypeImageIndex || mt == dockerManifestList {
		var idx ocispec.Index
		if err := c.readJSON(ctx, "index", dgst, &idx); err != nil {
			return nil, err
		}
		dgst = ""
		for _, m := range idx.Manifests {
			if m.Platform == nil || (m.Platform.OS == "linux" && m.Platform.Architecture == goruntime.GOARCH) {
				mt, dgst = m.MediaType, m.Digest.String()
				break
			}
		}
		if dgst == "" {
			return nil, fmt.Errorf("index %s has no manifest for linux/%s", target.Digest, goruntime.GOARCH)
		}
	}
	if mt != ocispec.MediaTypeImageManifest && mt != dockerManifest {
		return nil, fmt.Errorf("unsupported image media type %q", mt)
	}
	var m ocispec.Manifest
	if err := c.readJSON(ctx, "manifest", dgst, &m); err != nil {
		return nil, err
	}
	var cfg ocispec.Image
	if err := c.readJSON(ctx, "config", m.Config.Digest.String(), &cfg); err != nil {
		return nil, err
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("image config %s lists %d layers, its manifest %d", m.Config.Digest, len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	return &image{config: m.Config, layers: m.Layers, diffIDs: cfg.RootFS.DiffIDs}, nil
}

// isUnpacked tells whether the image's top layer is a committed snapshot
// on snapshotter.
func (c *Client) isUnpacked(ctx context.Context, img *image, snapshotter string) (bool, error) {
	_, err := c.snapshots.Stat(ctx, &snapshotsapi.StatSnapshotRequest{Snapshotter: snapshotter, Key: identity.ChainID(img.diffIDs).String()})
	err = native(err)
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// unpack applies the image's layers that are not there yet, each onto a
// snapshot of the one below, and commits each under its chain ID with
// labels. The image config then names the top snapshot
// (containerd.io/gc.ref.snapshot.<snapshotter>), so that the garbage
// collector keeps the layers while the image exists and removes them with
// it. ctx must carry a lease: it holds what is made until then.
func (c *Client) unpack(ctx context.Context, img *image, snapshotter string, labels map[string]string) error {
	var parent string
	for i, layer := range img.layers {
		chain := identity.ChainID(img.diffIDs[:i+1]).String()
		_, err := c.snapshots.Stat(ctx, &snapshotsapi.StatSnapshotRequest{Snapshotter: snapshotter, Key: chain})
		switch err = native(err); {
		case err == nil:
			parent = chain
			continue
		case !errdefs.IsNotFound(err):
			return err
		}
		if err := c.applyLayer(ctx, snapshotter, layer, img.diffIDs[i], parent, chain, labels); err != nil {
			return err
		}
		parent = chain
	}
	_, err := c.content.Update(ctx, &contentapi.UpdateRequest{
		Info:       &contentapi.Info{Digest: img.config.Digest.String(), Labels: map[string]string{"containerd.io/gc.ref.snapshot." + snapshotter: parent}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels.containerd.io/gc.ref.snapshot." + snapshotter}},
	})
	if err != nil {
		return fmt.Errorf("label image config %s: %w", img.config.Digest, native(err))
	}
	return nil
}

// applyLayer unpacks one layer onto a new active snapshot of parent and
// commits it as chain.
func (c *Client) applyLayer(ctx context.Context, snapshotter string, layer ocispec.Descriptor, diffID digest.Digest, parent, chain string, labels map[string]string) error {
	key := "extract-" + randomID() + " " + chain
	prep, err := c.snapshots.Prepare(ctx, &snapshotsapi.PrepareSnapshotRequest{Snapshotter: snapshotter, Key: key, Parent: parent, Labels: labels})
	if err != nil {
		return fmt.Errorf("prepare a snapshot for layer %s: %w", layer.Digest, native(err))
	}
	committed := false
	defer func() {
		if !committed {
			_ = c.removeSnapshot(context.WithoutCancel(ctx), snapshotter, key)
		}
	}()
	applied, err := c.diff.Apply(ctx, &diffapi.ApplyRequest{
		Diff:   &types.Descriptor{MediaType: layer.MediaType, Digest: layer.Digest.String(), Size: layer.Size, Annotations: layer.Annotations},
		Mounts: prep.Mounts,
	})
	if err != nil {
		return fmt.Errorf("apply layer %s: %w", layer.Digest, native(err))
	}
	if applied.Applied.GetDigest() != diffID.String() {
		return fmt.Errorf("layer %s unpacked to %s, its config says %s", layer.Digest, applied.Applied.GetDigest(), diffID)
	}
	_, err = c.snapshots.Commit(ctx, &snapshotsapi.CommitSnapshotRequest{Snapshotter: snapshotter, Name: chain, Key: key, Labels: labels})
	if err = native(err); err != nil && !errdefs.IsAlreadyExists(err) {
		return fmt.Errorf("commit layer %s: %w", layer.Digest, err)
	}
	committed = err == nil
	return nil
}
