package advisor

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/measure/measuretest"
)

func i64(n int64) *int64 { return &n }

const mib = 1 << 20

func TestLandings(t *testing.T) {
	volume := api.MountWrites{Type: "volume", Name: "pgdata", Source: "/var/lib/docker/volumes/pgdata/_data", Destination: "/data", RW: true,
		Bytes: i64(900 * mib), ModifiedBytes: i64(64 * mib)}
	bind := api.MountWrites{Type: "bind", Source: "/srv/logs", Destination: "/logs", RW: true, Bytes: i64(5 * mib), ModifiedBytes: i64(2 * mib)}
	small := api.MountWrites{Type: "bind", Source: "/srv/run", Destination: "/run/app", RW: true, Bytes: i64(10), ModifiedBytes: i64(10)}
	unmeasured := api.MountWrites{Type: "volume", Name: "nfs", Destination: "/nfs", RW: true}
	for _, c := range []struct {
		name         string
		layer        api.LayerWrites
		block        *api.BlockWrites
		mounts       []api.MountWrites
		want         []string // where:bytes in MiB
		unattributed *int64
	}{
		{"the layer writer", api.LayerWrites{Bytes: 64 * mib, Exact: true}, &api.BlockWrites{Bytes: 65 * mib}, nil,
			[]string{"layer"}, i64(1 * mib)},
		{"the volume writer", api.LayerWrites{Bytes: 4096, Exact: true}, &api.BlockWrites{Bytes: 64*mib + 4096}, []api.MountWrites{volume},
			[]string{"volume pgdata"}, i64(0)},
		{"layer and mounts, largest first", api.LayerWrites{Bytes: 10 * mib, Exact: true}, &api.BlockWrites{Bytes: 200 * mib},
			[]api.MountWrites{small, bind, volume, unmeasured}, []string{"volume pgdata", "layer", "bind /srv/logs"}, i64(200*mib - 10*mib - 66*mib - 10)},
		{"rewrites in place grow nothing", api.LayerWrites{Bytes: 2 * mib, Exact: true}, &api.BlockWrites{Bytes: 500 * mib}, nil,
			[]string{"layer"}, i64(498 * mib)},
		{"no cgroup", api.LayerWrites{Bytes: 0, Exact: true}, nil, []api.MountWrites{small}, nil, nil},
		{"an idle container", api.LayerWrites{Bytes: 120, Exact: true}, &api.BlockWrites{Bytes: 0}, nil, nil, i64(0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, un := landings(c.layer, c.block, c.mounts)
			var where []string
			for _, l := range got {
				s := l.Where
				if l.Name != "" {
					s += " " + l.Name
				} else if l.Source != "" {
					s += " " + l.Source
				}
				where = append(where, s)
				if l.Where == "layer" && (l.Bytes != c.layer.Bytes || l.Exact != c.layer.Exact) {
					t.Errorf("layer landing %+v, want the layer's bytes and exactness", l)
				}
				if l.Where != "layer" && l.Exact {
					t.Errorf("mount landing %+v is exact; modified file sizes are an estimate", l)
				}
			}
			if !slices.Equal(where, c.want) {
				t.Errorf("landings = %v, want %v", where, c.want)
			}
			if (un == nil) != (c.unattributed == nil) || un != nil && *un != *c.unattributed {
				t.Errorf("unattributed = %v, want %v", ptrStr(un), ptrStr(c.unattributed))
			}
		})
	}
}

func ptrStr(p *int64) any {
	if p == nil {
		return "nil"
	}
	return *p
}

func TestAdvice(t *testing.T) {
	cost := &api.LayerCost{Workload: measure.SeqWrite, Bytes: 64 * mib, ExtraSeconds: 0.05, Low: -0.01, High: 0.12}
	writer := api.Container{Name: "writer", Layer: api.LayerWrites{Bytes: 64 * mib, TopPaths: []api.PathBytes{{Path: "/data/out", Bytes: 64 * mib}}}, Cost: cost}
	adv := adviceFor(&writer, 32*mib)
	if len(adv) != 1 || adv[0].Kind != AdviceLayerWrites || adv[0].Path != "/data/out" ||
		!strings.Contains(adv[0].Message, "mount a volume at /data/out") || !strings.Contains(adv[0].Message, "the layer added +50.0 ms [-10.0 ms to +120 ms] to writing its 64.0 MiB") ||
		!strings.Contains(adv[0].Message, "(as the seqwrite job") {
		t.Errorf("layer writer: %+v", adv)
	}
	if adv := adviceFor(&writer, 128*mib); len(adv) != 0 {
		t.Errorf("below min_layer_bytes: %+v, want no advice", adv)
	}

	// A database with its data in the layer is flagged before it wrote
	// much, and its data directory is not advised twice.
	pg := api.Container{Name: "pg", Layer: api.LayerWrites{Bytes: 40 * mib, TopPaths: []api.PathBytes{
		{Path: "/var/lib/postgresql/data", Bytes: 39 * mib}, {Path: "/var/log/app", Bytes: mib}}},
		Database: &api.Database{Name: "postgres", DataDirs: []string{"/var/lib/postgresql/data"}, InLayer: true}}
	adv = adviceFor(&pg, 32*mib)
	if len(adv) != 1 || adv[0].Kind != AdviceDatabaseInLayer || adv[0].Path != "/var/lib/postgresql/data" ||
		!strings.Contains(adv[0].Message, "Mount a volume at /var/lib/postgresql/data") {
		t.Errorf("database in its layer: %+v", adv)
	}
	pg.Layer = api.LayerWrites{Bytes: 12 * 1024}
	if adv := adviceFor(&pg, 32*mib); len(adv) != 1 || adv[0].Kind != AdviceDatabaseInLayer {
		t.Errorf("database that wrote little: %+v, want it flagged anyway", adv)
	}
	pg.Database.InLayer = false
	if adv := adviceFor(&pg, 32*mib); len(adv) != 0 {
		t.Errorf("database on a volume: %+v, want no advice", adv)
	}

	// Without an upper directory the paths are unknown.
	btrfs := api.Container{Name: "w", Layer: api.LayerWrites{Bytes: 64 * mib, Source: SourceEngine}}
	if adv := adviceFor(&btrfs, 32*mib); len(adv) != 1 || !strings.Contains(adv[0].Message, "docker diff w") || adv[0].Path != "" {
		t.Errorf("no paths: %+v", adv)
	}
}

func TestRankAndTopN(t *testing.T) {
	cs := []api.Container{
		{Name: "idle", Layer: api.LayerWrites{Bytes: 0}, BlockIO: &api.BlockWrites{Bytes: 0}},
		{Name: "vol", Layer: api.LayerWrites{Bytes: 0}, BlockIO: &api.BlockWrites{Bytes: 64 * mib}},
		{Name: "writer", Layer: api.LayerWrites{Bytes: 64 * mib}, BlockIO: &api.BlockWrites{Bytes: 64 * mib}},
		{Name: "nocgroup", Layer: api.LayerWrites{Bytes: 0}},
		{Name: "pg", Layer: api.LayerWrites{Bytes: 4096}, BlockIO: &api.BlockWrites{Bytes: 8192}},
		{Name: "alpha", Layer: api.LayerWrites{Bytes: 0}, BlockIO: &api.BlockWrites{Bytes: 0}},
	}
	rank(cs)
	var names []string
	for i, c := range cs {
		names = append(names, c.Name)
		if c.Rank != i+1 {
			t.Errorf("%s: rank %d at position %d", c.Name, c.Rank, i+1)
		}
	}
	if want := []string{"writer", "pg", "vol", "alpha", "idle", "nocgroup"}; !slices.Equal(names, want) {
		t.Errorf("ranked %v, want %v", names, want)
	}

	top, rest := TopN(cs, 2)
	if len(top) != 2 || top[0].Name != "writer" || top[1].Name != "pg" {
		t.Errorf("top 2 = %v", top)
	}
	if rest != (Rest{Containers: 4, LayerBytes: 0}) {
		t.Errorf("rest = %+v", rest)
	}
	if top, rest := TopN(cs, 10); len(top) != 6 || rest != (Rest{}) {
		t.Errorf("top 10 of 6 = %d, %+v; want all, nothing summed", len(top), rest)
	}
	if top, rest := TopN(cs, 0); len(top) != 0 || rest.Containers != 6 || rest.LayerBytes != 64*mib+4096 {
		t.Errorf("top 0 = %d, %+v; want everything summed", len(top), rest)
	}
}

// volumeSample gives a sample the operation counts and bytes the write
// rate is computed from.
func withCounts(s measure.Sample, secs float64) measure.Sample {
	s.Read.IOs = int64(s.Read.IOPS * secs)
	s.Write.IOs = int64(s.Write.IOPS * secs)
	s.Write.Bytes = int64(s.Write.BandwidthBytes * secs)
	return s
}

func TestLayerVsVolume(t *testing.T) {
	var samples []measure.Sample
	for r := 1; r <= 8; r++ {
		for _, w := range []measure.Workload{measure.SeqWrite, measure.Fsync} {
			vol := measuretest.HostFig(r)
			samples = append(samples,
				withCounts(measuretest.Sample(r, measure.TargetHost, w, vol.Scaled(3, 1)), 2),
				withCounts(measuretest.Sample(r, measure.TargetVolume, w, vol), 2),
				// The layer loses a fifth of the volume's throughput: its
				// writes take a quarter longer.
				withCounts(measuretest.Sample(r, measure.TargetContainer, w, vol.Scaled(0.8, 1.25)), 2),
				withCounts(measuretest.Sample(r, measure.TargetBind, w, vol.Scaled(0.1, 10)), 2))
		}
	}
	// A failed volume round has no pair.
	samples = append(samples, measuretest.Sample(9, measure.TargetVolume, measure.SeqWrite, measuretest.Fig{Failed: measure.ReasonNoSpace}),
		withCounts(measuretest.Sample(9, measure.TargetContainer, measure.SeqWrite, measuretest.HostFig(9)), 2))

	got := LayerVsVolume(samples, 0.95)
	if len(got) != 2 || got[0].Workload != measure.SeqWrite || got[1].Workload != measure.Fsync {
		t.Fatalf("LayerVsVolume = %+v, want seqwrite and fsync", got)
	}
	for _, o := range got {
		if math.Abs(o.Slowdown-0.25) > 1e-9 || math.Abs(o.SlowdownLow-0.25) > 1e-9 || math.Abs(o.SlowdownHigh-0.25) > 1e-9 || o.Rounds != 8 {
			t.Errorf("%s: %+v, want a slowdown of exactly 0.25 over 8 pairs", o.Workload, o)
		}
		if wantMetric := map[measure.Workload]string{measure.SeqWrite: "bandwidth", measure.Fsync: "iops"}[o.Workload]; o.Metric != wantMetric {
			t.Errorf("%s: metric %s, want %s", o.Workload, o.Metric, wantMetric)
		}
		// Half of the figures are writes: the write rate is half the
		// bandwidth, pooled over the rounds' run time.
		var bytes, secs float64
		for r := 1; r <= 8; r++ {
			bytes += measuretest.HostFig(r).Bandwidth / 2 * 2
			secs += 2
		}
		if want := bytes / secs; math.Abs(o.VolumeWriteBytesPerSecond-want) > 0.01*want {
			t.Errorf("%s: volume write rate %g, want %g", o.Workload, o.VolumeWriteBytesPerSecond, want)
		}
	}
	if got := LayerVsVolume(nil, 0.95); len(got) != 0 {
		t.Errorf("no samples: %+v", got)
	}

	cost := costOf(100*mib, measure.SeqWrite, got)
	base := float64(100*mib) / got[0].VolumeWriteBytesPerSecond
	if cost == nil || cost.Workload != measure.SeqWrite || math.Abs(cost.ExtraSeconds-0.25*base) > 1e-9 || cost.Low > cost.ExtraSeconds || cost.High < cost.ExtraSeconds {
		t.Errorf("costOf = %+v, want %g s", cost, 0.25*base)
	}
	if costOf(100*mib, measure.RandWrite, got) != nil || costOf(0, measure.SeqWrite, got) != nil || costOf(1000, measure.SeqWrite, got) != nil {
		t.Errorf("cost without a measured job or below 1 MiB is not nil")
	}
}

func TestSlowdownKeepsOrder(t *testing.T) {
	xs := []float64{-1, -0.2, 0, 0.1, 0.5, 0.9}
	for i := 1; i < len(xs); i++ {
		if slowdown(xs[i-1]) >= slowdown(xs[i]) {
			t.Errorf("slowdown(%g) = %g >= slowdown(%g) = %g", xs[i-1], slowdown(xs[i-1]), xs[i], slowdown(xs[i]))
		}
	}
	if slowdown(0.2) != 0.25 || slowdown(0) != 0 || slowdown(-1) != -0.5 {
		t.Errorf("slowdown(0.2, 0, -1) = %g %g %g", slowdown(0.2), slowdown(0), slowdown(-1))
	}
}
