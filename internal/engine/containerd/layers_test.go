package containerd

import (
	"encoding/json"
	"path"
	"testing"

	"github.com/containerd/containerd/v2/core/images"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/helper"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
)

// TestColdImageInLayers imports the cold image, whose tree spreads over
// several layers, into a private containerd: its manifest names one layer
// per layer of the image, whose diff IDs are the image's tar streams, and
// a fresh container sees the whole tree, its directories merged from
// every layer. A sweep then leaves nothing labelled.
func TestColdImageInLayers(t *testing.T) {
	_, c, ctx := privateContainerd(t)
	im := probeImage(t).WithCopyUpFiles()
	ref, err := c.EnsureImage(ctx, im, "lp1-boot-1-1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.api.GetImage(c.ns(ctx), ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := images.Manifest(c.ns(ctx), got.ContentStore(), got.Target(), got.Platform())
	if err != nil {
		t.Fatal(err)
	}
	diffIDs, err := got.RootFS(c.ns(ctx))
	if err != nil {
		t.Fatal(err)
	}
	streams, err := im.LayerStreams()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1+probeimage.TreeLayers || len(diffIDs) != len(streams) {
		t.Fatalf("%d layers, %d diff IDs; want %d", len(m.Layers), len(diffIDs), 1+probeimage.TreeLayers)
	}
	for k, s := range streams {
		if diffIDs[k].Encoded() != s.DiffID {
			t.Errorf("layer %d: diff ID %s, want %s", k, diffIDs[k], s.DiffID)
		}
	}
	p, err := c.StartProbe(ctx, engine.ProbeSpec{Engine: "test", Image: ref, Owner: "lp1-boot-1-1", Mode: measure.ModeCold, WritableLayerOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Exec(ctx, p, []string{engine.ContainerHelper, "probe-helper", "lookup", path.Join(probeimage.TreeDir, "d1")})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("lookup: %v, exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	var lr helper.LookupResult
	if err := json.Unmarshal(res.Stdout, &lr); err != nil || lr.Error != "" {
		t.Fatalf("lookup: %v %s: %s", err, lr.Error, res.Stdout)
	}
	if lr.Entries != 2400 {
		t.Errorf("the container's walk of the tree saw %d entries, want its 2400 (2000 files in 400 directories) from every layer", lr.Entries)
	}
	if err := c.RemoveProbe(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sweep(ctx, nil, true); err != nil {
		t.Fatal(err)
	}
	if n := labelled(t, c); n != 0 {
		t.Errorf("%d labelled objects left", n)
	}
}
