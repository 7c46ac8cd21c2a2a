package report

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

func containersAnswer() api.ContainersResponse {
	at := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	grown := int64(-2 << 20)
	one := int64(64 << 20)
	writer := api.Container{Name: "writer", Image: "app:1", Rank: 1,
		Layer:      api.LayerWrites{Bytes: 64 << 20, GrowthBytes: &grown, GrowthSeconds: 21600, Source: "upper_dir", Exact: false, TopPaths: []api.PathBytes{{Path: "/data/out", Bytes: 64 << 20}}},
		BlockIO:    &api.BlockWrites{Bytes: 70 << 20, Cgroup: "v2"},
		WritesLand: []api.Landing{{Where: "layer", Bytes: 64 << 20}},
		Cost:       &api.LayerCost{Workload: measure.SeqWrite, Bytes: 64 << 20, ExtraSeconds: 0.25, Low: -0.01, High: 0.5},
		Advice:     []api.Advice{{Kind: "layer_writes", Path: "/data/out", Message: "mount a volume at /data/out."}}}
	vol := api.Container{Name: "vol", Image: "app:1", Rank: 2, Layer: api.LayerWrites{Source: "upper_dir", Exact: true},
		Mounts:     []api.MountWrites{{Type: "volume", Name: "lpvol", Destination: "/data", RW: true, Bytes: &one, ModifiedBytes: &one}},
		WritesLand: []api.Landing{{Where: "volume", Name: "lpvol", Destination: "/data", Bytes: 64 << 20}}}
	pg := api.Container{Name: "pg", Image: "postgres:16", Rank: 3, Layer: api.LayerWrites{Source: "none"},
		Database: &api.Database{Name: "postgres", DataDirs: []string{"/var/lib/postgresql/data"}, InLayer: true},
		Advice:   []api.Advice{{Kind: "database_in_layer", Path: "/var/lib/postgresql/data", Message: "mount a volume at /var/lib/postgresql/data."}}}
	return api.ContainersResponse{Confidence: 0.95, Engines: []api.EngineContainers{
		{Engine: "default", Driver: "overlay2", ObservedAt: &at,
			LayerVsVolume: []api.LayerOverhead{
				{Workload: measure.SeqWrite, Slowdown: 0.04, SlowdownLow: -0.01, SlowdownHigh: 0.1, Rounds: 12, Coverage: 0.96},
				{Workload: measure.Fsync, Slowdown: 0.5, SlowdownLow: 0.2, SlowdownHigh: 0.9, Rounds: 4, Coverage: 0.875},
			},
			Pass:       &api.AdvisorPass{DurationSeconds: 0.2, CPUSeconds: 0.03, Entries: 40, Containers: 3, Capped: 1},
			Containers: []api.Container{writer, vol, pg}},
		{Engine: "lab", Error: "cannot reach Docker engine at unix:///lab.sock: no such socket"},
	}}
}

func TestWriteContainers(t *testing.T) {
	var b bytes.Buffer
	if err := WriteContainers(&b, containersAnswer()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Engine default (overlay2): 3 running containers at 2026-11-22T03:00:00Z",
		"1 container at a walk cap",
		"seqwrite +4% [-1% to +10%], fsync +50% [no interval]*",
		"* fewer than 6 paired rounds",
		">=64.0 MiB (-2.0 MiB in 6h0m0s)", // a lower bound, shrinking
		"~70.0 MiB",                       // block writes are an estimate
		"layer >=64.0 MiB (/data/out)",    // not exact: marked in the landing too
		"volume lpvol at /data ~64.0 MiB", // a mount's bytes are an estimate
		"postgres: DATA IN LAYER",         // the database flag
		"+250 ms [-10.0 ms, +500 ms] as seqwrite",
		"pg: mount a volume at /var/lib/postgresql/data.",
		"except \">=\": a lower bound",
		"Engine lab (-)",
		"ERROR: the containers could not be listed: cannot reach Docker engine",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "layer vs volume") != 1 {
		t.Errorf("the unreachable engine has a layer-vs-volume line:\n%s", out)
	}
	// The unmeasured layer shows no figure, not a zero.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " pg ") && strings.Contains(line, " 0 B ") {
			t.Errorf("unmeasured layer printed as 0 B: %q", line)
		}
	}
	if err := WriteContainers(failWriter{}, containersAnswer()); err == nil {
		t.Error("a failing writer gave no error")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
