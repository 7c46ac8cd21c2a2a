package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// ImageRepository is the repository of the images EnsureImage imports; the
// tag is the first 12 hex digits of the root file system's digest.
const ImageRepository = "layerprobe-probe"

// labelValue is what layerprobe writes into LABEL changes unquoted.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// EnsureImage makes the probe image im available on the engine and returns
// its reference, layerprobe-probe:<digest[:12]>. An image already labelled
// with im's digest is reused (and tagged again if its tag was removed);
// otherwise the root file system is streamed to the engine with
// ImageImport. Nothing is ever pulled.
func (c *Client) EnsureImage(ctx context.Context, im *probeimage.Image, owner string) (string, error) {
	if im == nil || len(im.Digest) < 12 || !labelValue.MatchString(im.Digest) {
		return "", errors.New("ensure probe image: image has no valid digest")
	}
	if owner != "" && !labelValue.MatchString(owner) {
		return "", fmt.Errorf("ensure probe image: owner %q has characters a label cannot carry unquoted", owner)
	}
	ref := ImageRepository + ":" + im.Digest[:12]

	list, err := c.api.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("label", LabelDigest+"="+im.Digest),
	})
	if err != nil {
		return "", c.fail("list probe images", err)
	}
	for _, img := range list.Items {
		if slices.Contains(img.RepoTags, ref) {
			c.logger.Debug("reusing probe image", "image", ref, "image_id", img.ID)
			return ref, nil
		}
	}
	if len(list.Items) > 0 {
		id := list.Items[0].ID
		if _, err := c.api.ImageTag(ctx, client.ImageTagOptions{Source: id, Target: ref}); err != nil {
			return "", c.fail("tag probe image", err)
		}
		c.logger.Debug("reusing probe image under a new tag", "image", ref, "image_id", id)
		return ref, nil
	}

	if err := c.importImage(ctx, im, ref, owner); err != nil {
		return "", err
	}
	// The import answered without error; make sure it left the image.
	got, err := c.api.ImageInspect(ctx, ref)
	if err != nil {
		return "", c.fail("inspect imported probe image", err)
	}
	if got.Config == nil || got.Config.Labels[LabelDigest] != im.Digest {
		return "", fmt.Errorf("ensure probe image: %s on engine %s does not carry digest %s", ref, c.name, im.Digest)
	}
	c.logger.Info("imported probe image", "image", ref, "image_id", got.ID, "bytes", im.Size())
	return ref, nil
}

// importImage streams im's tar through a pipe into ImageImport.
func (c *Client) importImage(ctx context.Context, im *probeimage.Image, ref, owner string) error {
	labels := []string{
		LabelManaged + "=true",
		LabelRole + "=image",
		LabelDigest + "=" + im.Digest,
	}
	if owner != "" {
		labels = append(labels, LabelOwner+"="+owner)
	}
	entrypoint, _ := json.Marshal([]string{ContainerHelper, "probe-helper", "idle"})
	changes := []string{
		"LABEL " + strings.Join(labels, " "),
		"ENTRYPOINT " + string(entrypoint),
	}

	pr, pw := io.Pipe()
	writeErr := make(chan error, 1)
	go func() {
		err := im.WriteTar(pw)
		pw.CloseWithError(err)
		writeErr <- err
	}()
	// Whatever happens below, unblock the writer and collect its result.
	// ours reports a failure on our side of the pipe (a host file that
	// changed since Build), not the engine closing its end.
	finish := func() (ours error) {
		pr.CloseWithError(errImportDone)
		err := <-writeErr
		if err == nil || errors.Is(err, errImportDone) || errors.Is(err, io.ErrClosedPipe) {
			return nil
		}
		return err
	}

	resp, err := c.api.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: changes})
	if err != nil {
		if ours := finish(); ours != nil {
			return fmt.Errorf("import probe image: %w", ours)
		}
		return c.fail("import probe image", err)
	}
	streamErr := readStream(resp)
	resp.Close()
	if ours := finish(); ours != nil {
		return fmt.Errorf("import probe image: %w", ours)
	}
	if streamErr != nil {
		return c.fail("import probe image", streamErr)
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
			ref, c.name, ErrImageNotFound)
	}
	if err != nil {
		return c.fail("check probe image", err)
	}
	return nil
}
