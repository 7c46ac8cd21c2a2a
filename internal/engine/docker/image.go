package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"

	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// labelValue is what layerprobe writes into LABEL changes unquoted.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// EnsureImage makes the probe image im available on the engine and returns
// its reference, layerprobe-probe:<digest[:12]>. The image under that
// reference is reused when it is im: it carries im's digest label or, on an
// engine that did not keep the labels, its layers are im's tar streams
// (the diff IDs the engine computed itself). A labelled image that lost its
// tag is tagged again. Otherwise a one-layer root file system is streamed
// to Docker with ImageImport, and an image of several layers, or any image
// to Podman, as a docker-archive with ImageLoad. Nothing is ever pulled.
func (c *Client) EnsureImage(ctx context.Context, im *probeimage.Image, owner string) (string, error) {
	if im == nil || len(im.Digest) < 12 || !labelValue.MatchString(im.Digest) {
		return "", errors.New("ensure probe image: image has no valid digest")
	}
	if owner != "" && !labelValue.MatchString(owner) {
		return "", fmt.Errorf("ensure probe image: owner %q has characters a label cannot carry unquoted", owner)
	}
	ref := engine.ImageRepository + ":" + im.Digest[:12]

	// By reference first: the engine resolves its own spelling of the
	// name (Podman stores docker.io/library/layerprobe-probe:...).
	got, err := c.api.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		ours, err := isImage(got.InspectResponse, im)
		if err != nil {
			return "", fmt.Errorf("ensure probe image: %w", err)
		}
		if ours {
			c.logger.Debug("reusing probe image", "image", ref, "image_id", got.ID)
			return ref, nil
		}
		// Another image holds the tag; the import below takes it over.
	case !isNotFound(err):
		return "", c.fail("inspect probe image", err)
	}

	list, err := c.api.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("label", engine.LabelDigest+"="+im.Digest),
	})
	if err != nil {
		return "", c.fail("list probe images", err)
	}
	if len(list.Items) > 0 {
		id := list.Items[0].ID
		if _, err := c.api.ImageTag(ctx, client.ImageTagOptions{Source: id, Target: ref}); err != nil {
			return "", c.fail("tag probe image", err)
		}
		c.logger.Debug("reusing probe image under a new tag", "image", ref, "image_id", id)
		return ref, nil
	}

	podman, err := c.isPodman(ctx)
	if err != nil {
		return "", err
	}
	var diffIDs []string
	if im.Layers() == 1 && !podman {
		var diffID string
		diffID, err = c.importImage(ctx, im, ref, owner)
		diffIDs = []string{diffID}
	} else {
		diffIDs, err = c.loadImage(ctx, im, ref, owner)
	}
	if err != nil {
		return "", err
	}
	// The import answered without error; make sure it left the image.
	got, err = c.api.ImageInspect(ctx, ref)
	if err != nil {
		return "", c.fail("inspect imported probe image", err)
	}
	if !hasLayers(got.InspectResponse, diffIDs) {
		return "", fmt.Errorf("ensure probe image: %s on engine %s is not the image just imported (layers %v, want %v)",
			ref, c.name, rootLayers(got.InspectResponse), prefixed(diffIDs))
	}
	if !carriesDigest(got.InspectResponse, im) {
		c.logger.Warn("the engine did not keep the probe image's labels: cleanup cannot find the image; remove it by name when done",
			"image", ref, "image_id", got.ID)
	}
	c.logger.Info("imported probe image", "image", ref, "image_id", got.ID, "bytes", im.Size())
	return ref, nil
}

// isPodman reports whether the engine is Podman: from Info when it was
// asked, else from the engine's version. Podman's ImageImport leaves the
// whole upload behind as /var/tmp/api_load.tar* (podman#28531), a probe
// image's size for every import; its ImageLoad removes its copy.
func (c *Client) isPodman(ctx context.Context) (bool, error) {
	if runtime, _ := c.runtimeInfo(); runtime != "" {
		return runtime == engine.RuntimePodman, nil
	}
	ver, err := c.api.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return false, c.fail("get engine version", err)
	}
	return runtimeOf(ver.Components) == engine.RuntimePodman, nil
}

// isImage reports whether got is im: by its digest label, or else by its
// layers' diff IDs (one pass over im's content).
func isImage(got image.InspectResponse, im *probeimage.Image) (bool, error) {
	if carriesDigest(got, im) {
		return true, nil
	}
	if len(rootLayers(got)) != im.Layers() {
		return false, nil
	}
	layers, err := im.LayerStreams()
	if err != nil {
		return false, err
	}
	diffIDs := make([]string, len(layers))
	for i, l := range layers {
		diffIDs[i] = l.DiffID
	}
	return hasLayers(got, diffIDs), nil
}

func carriesDigest(got image.InspectResponse, im *probeimage.Image) bool {
	return got.Config != nil && got.Config.Labels[engine.LabelDigest] == im.Digest
}

func rootLayers(got image.InspectResponse) []string { return got.RootFS.Layers }

// hasLayers reports whether the image's root file system is the layers
// whose uncompressed tar streams have SHA-256 diffIDs (hex), in order.
func hasLayers(got image.InspectResponse, diffIDs []string) bool {
	return slices.Equal(rootLayers(got), prefixed(diffIDs))
}

// prefixed names hex SHA-256 digests as an engine does: sha256:<hex>.
func prefixed(hexes []string) []string {
	out := make([]string, len(hexes))
	for i, h := range hexes {
		out[i] = "sha256:" + h
	}
	return out
}

// probeLabels are the labels of probe image im.
func probeLabels(im *probeimage.Image, owner string) []string {
	labels := []string{
		engine.LabelManaged + "=true",
		engine.LabelRole + "=image",
		engine.LabelDigest + "=" + im.Digest,
	}
	if owner != "" {
		labels = append(labels, engine.LabelOwner+"="+owner)
	}
	return labels
}

// importImage streams im's tar through a pipe into ImageImport and returns
// the stream's SHA-256 (hex), the diff ID the engine gives the layer.
//
// Every label is a LABEL change of its own: Docker accepts several pairs in
// one LABEL, Podman takes the first key and the rest of the line as its
// value.
func (c *Client) importImage(ctx context.Context, im *probeimage.Image, ref, owner string) (string, error) {
	labels := probeLabels(im, owner)
	entrypoint, _ := json.Marshal([]string{engine.ContainerHelper, "probe-helper", "idle"})
	changes := make([]string, 0, len(labels)+1)
	for _, l := range labels {
		changes = append(changes, "LABEL "+l)
	}
	changes = append(changes, "ENTRYPOINT "+string(entrypoint))

	sum := sha256.New()
	err := c.stream(ctx, "import probe image",
		func(w io.Writer) error { return im.WriteTar(io.MultiWriter(w, sum)) },
		func(r io.Reader) (io.ReadCloser, error) {
			return c.api.ImageImport(ctx, client.ImageImportSource{Source: r, SourceName: "-"}, ref,
				client.ImageImportOptions{Changes: changes})
		})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// stream sends what write writes to the engine through a pipe (send
// makes the request that reads it) and reads the engine's answer, a JSON
// message stream, to its end. A failure on our side of the pipe (a host
// file that changed since Build) is told apart from the engine's.
func (c *Client) stream(ctx context.Context, what string, write func(io.Writer) error, send func(io.Reader) (io.ReadCloser, error)) error {
	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		err := write(pw)
		pw.CloseWithError(err)
		writeErr <- err
	}()
	// Whatever happens below, unblock the writer and collect its result.
	finish := func() (ours error) {
		pr.CloseWithError(errImportDone)
		err := <-writeErr
		if err == nil || errors.Is(err, errImportDone) || errors.Is(err, io.ErrClosedPipe) {
			return nil
		}
		return err
	}
	resp, err := send(pr)
	if err != nil {
		if ours := finish(); ours != nil {
			return fmt.Errorf("%s: %w", what, ours)
		}
		return c.fail(what, err)
	}
	streamErr := readStream(resp)
	resp.Close()
	if ours := finish(); ours != nil {
		return fmt.Errorf("%s: %w", what, ours)
	}
	if streamErr != nil {
		return c.fail(what, streamErr)
	}
	return nil
}

// errImportDone unblocks the tar writer once the engine has answered.
var errImportDone = errors.New("import finished")

// streamMessage is one JSON message of a streaming endpoint's answer. The
// engine answers 200 first and reports failures inside the stream.
type streamMessage struct {
	Status      string `json:"status"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readStream reads a JSON message stream to its end and returns the first
// error reported in it.
func readStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	var first error
	for {
		var m streamMessage
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return first
		}
		if err != nil {
			if first != nil {
				return first
			}
			return fmt.Errorf("read engine answer: %w", err)
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" && first == nil {
			first = fmt.Errorf("engine reported: %s", firstLine(msg))
		}
	}
}

// CheckImage checks that a user-named probe image exists on the engine.
// It never pulls: a missing image is an error wrapping ErrImageNotFound.
func (c *Client) CheckImage(ctx context.Context, ref string) error {
	if ref == "" {
		return errors.New("check probe image: empty image reference")
	}
	_, err := c.api.ImageInspect(ctx, ref)
	if isNotFound(err) {
		return fmt.Errorf("check probe image: %q is not present on engine %s and layerprobe never pulls; load or pull it yourself: %w",
			ref, c.name, engine.ErrImageNotFound)
	}
	if err != nil {
		return c.fail("check probe image", err)
	}
	return nil
}
