package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// archiveManifest is an entry of a docker-archive's manifest.json, the
// format of `docker save` that Docker's and Podman's /images/load read.
type archiveManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// loadImage streams im as a docker-archive into ImageLoad under the name
// ref, and returns its layers' diff IDs (hex). ImageImport makes a
// one-layer image only, and on Podman leaks its upload. The configuration
// carries the labels and entrypoint ImageImport's changes would set; the
// archive is deterministic, so the layers' digests, computed in a first
// pass for the configuration and the archive's headers, are those of the
// streams that follow.
func (c *Client) loadImage(ctx context.Context, im *probeimage.Image, ref, owner string) ([]string, error) {
	layers, err := im.LayerStreams()
	if err != nil {
		return nil, fmt.Errorf("load probe image: %w", err)
	}
	labels := map[string]string{}
	for _, l := range probeLabels(im, owner) {
		k, v, _ := strings.Cut(l, "=")
		labels[k] = v
	}
	diffIDs := make([]string, len(layers))
	manifest := []archiveManifest{{RepoTags: []string{ref}}}
	for i, l := range layers {
		diffIDs[i] = l.DiffID
		manifest[0].Layers = append(manifest[0].Layers, l.DiffID+"/layer.tar")
	}
	cfg := probeimage.Config(labels, diffIDs)
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("load probe image: %w", err)
	}
	sum := sha256.Sum256(cfgJSON)
	manifest[0].Config = hex.EncodeToString(sum[:]) + ".json"
	manifestJSON, err := json.Marshal(manifest)
	if err != nil {
		return nil, fmt.Errorf("load probe image: %w", err)
	}

	err = c.stream(ctx, "load probe image",
		func(w io.Writer) error { return writeArchive(w, im, layers, manifest[0].Config, cfgJSON, manifestJSON) },
		func(r io.Reader) (io.ReadCloser, error) {
			return c.api.ImageLoad(ctx, r, client.ImageLoadWithQuiet(true))
		})
	if err != nil {
		return nil, err
	}
	return diffIDs, nil
}

// writeArchive writes the docker-archive: each layer's tar under its diff
// ID, then the configuration and manifest.json.
func writeArchive(w io.Writer, im *probeimage.Image, layers []probeimage.LayerStream, cfgName string, cfgJSON, manifestJSON []byte) error {
	tw := tar.NewWriter(w)
	mtime := time.Unix(946684800, 0).UTC()
	for i, l := range layers {
		if err := tw.WriteHeader(&tar.Header{Name: l.DiffID + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: l.DiffID + "/layer.tar", Typeflag: tar.TypeReg, Mode: 0o644, Size: l.Size, ModTime: mtime}); err != nil {
			return err
		}
		if _, err := im.WriteLayer(tw, i); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{cfgName, cfgJSON}, {"manifest.json", manifestJSON}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.b)), ModTime: mtime}); err != nil {
			return err
		}
		if _, err := tw.Write(f.b); err != nil {
			return err
		}
	}
	return tw.Close()
}
