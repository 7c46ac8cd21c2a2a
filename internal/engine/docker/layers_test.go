package docker

import (
	"encoding/json"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/helper"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// TestColdImageInLayers imports the cold image, whose tree spreads over
// several layers, into dockerd and into Podman (ImageLoad of a
// docker-archive), and checks what each engine made of it: one image
// layer per layer of the image, in order, with the probe's labels and
// entrypoint; reused by a second EnsureImage; and a fresh container that
// sees the whole tree, its directories merged from every layer.
func TestColdImageInLayers(t *testing.T) {
	testharness.RequireFio(t)
	// The real layerprobe as the image's helper: this test binary knows
	// only some of its verbs.
	bin, err := testharness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	base, err := probeimage.Build(testharness.HostFio, bin)
	if err != nil {
		t.Fatal(err)
	}
	im := base.WithCopyUpFiles()
	streams, err := im.LayerStreams()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(streams))
	for i, s := range streams {
		want[i] = "sha256:" + s.DiffID
	}
	for name, opts := range map[string]testdaemon.Options{
		"dockerd-overlay2": {Driver: "overlay2"},
		"podman-overlay":   {Engine: testdaemon.EnginePodman},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := testdaemon.Start(t, opts)
			c := newTestClient(t, d.Host)
			ctx := testCtx(t)
			ref, err := c.EnsureImage(ctx, im, "lp-owner-layers")
			if err != nil {
				t.Fatalf("EnsureImage: %v", err)
			}
			got, err := c.api.ImageInspect(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if layers := rootLayers(got.InspectResponse); len(layers) != 1+probeimage.TreeLayers || !slices.Equal(layers, want) {
				t.Errorf("layers %v, want %v", layers, want)
			}
			if l := got.Config.Labels; l[engine.LabelDigest] != im.Digest || l[engine.LabelRole] != "image" || l[engine.LabelOwner] != "lp-owner-layers" {
				t.Errorf("labels %v", l)
			}
			again, err := c.EnsureImage(ctx, im, "lp-owner-layers")
			if err != nil || again != ref {
				t.Fatalf("second EnsureImage = %q, %v; want %q", again, err, ref)
			}
			if _, _, imgs := labelled(t, c); len(imgs) != 1 {
				t.Errorf("images after the second EnsureImage: %v, want one", imgs)
			}
			if d.TempDir != "" {
				// Podman: the one-layer probe image is loaded too, and
				// neither upload stays behind in its TMPDIR (its
				// ImageImport leaves each as api_load.tar*).
				if _, err := c.EnsureImage(ctx, base, "lp-owner-layers"); err != nil {
					t.Fatalf("EnsureImage of the one-layer image: %v", err)
				}
				left, err := filepath.Glob(filepath.Join(d.TempDir, "*"))
				if err != nil || len(left) != 0 {
					t.Errorf("Podman's TMPDIR after two imports: %v (%v), want empty", left, err)
				}
			}

			p, err := c.StartProbe(ctx, engine.ProbeSpec{Engine: "test", Image: ref, Owner: "lp-owner-layers", Mode: measure.ModeCold, WritableLayerOnly: true})
			if err != nil {
				t.Fatalf("StartProbe: %v", err)
			}
			t.Cleanup(func() { _ = c.RemoveProbe(testCtx(t), p) })
			res := execOK(t, c, p, engine.ContainerHelper, "probe-helper", "lookup", path.Join(probeimage.TreeDir, "d1"))
			var lr helper.LookupResult
			if err := json.Unmarshal(res.Stdout, &lr); err != nil || lr.Error != "" {
				t.Fatalf("lookup: %v %s: %s", err, lr.Error, res.Stdout)
			}
			if lr.Entries != 2400 {
				t.Errorf("the container's walk of the tree saw %d entries, want its 2400 (2000 files in 400 directories) from every layer", lr.Entries)
			}
		})
	}
}
