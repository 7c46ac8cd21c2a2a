package advisor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// fakeEngine answers with fixed containers; it is all the advisor can ask
// an engine, so a test on it also shows the advisor asks nothing else.
type fakeEngine struct {
	containers []engine.Container
	sizes      map[string]int64
	listErr    error
	asked      []string // env variables asked for
}

func (f *fakeEngine) Containers(_ context.Context, env []string) ([]engine.Container, error) {
	f.asked = env
	return f.containers, f.listErr
}

func (f *fakeEngine) ContainerLayerSize(_ context.Context, id string) (int64, error) {
	n, ok := f.sizes[id]
	if !ok {
		return 0, errors.New("no size")
	}
	return n, nil
}

// scene is a host with five containers: one writes into its layer, one into
// a named volume, one into a bind mount, one idles, one is a database
// image with its data directory in the layer.
type scene struct {
	h      *fakeHost
	eng    *fakeEngine
	upper  map[string]string // container name -> upper dir
	volume string
	bind   string
}

func newScene(t *testing.T) *scene {
	h := newFakeHost(t)
	h.mount(cgroupV1)
	s := &scene{h: h, eng: &fakeEngine{sizes: map[string]int64{}}, upper: map[string]string{}}
	dir := t.TempDir()
	started := time.Now().Add(-time.Hour)
	s.volume, s.bind = filepath.Join(dir, "volumes", "lpvol", "_data"), filepath.Join(dir, "bind")
	writeFile(t, filepath.Join(s.volume, "blob"), 3*mib, time.Now())
	writeFile(t, filepath.Join(s.volume, "old"), 5*mib, started.Add(-time.Hour)) // there before the start
	writeFile(t, filepath.Join(s.bind, "blob"), 3*mib, time.Now())
	for i, name := range []string{"writer", "vol", "bind", "idle", "pg"} {
		upper := filepath.Join(dir, "overlay2", name, "diff")
		s.upper[name] = upper
		writeFile(t, filepath.Join(upper, "tmp", ".keep"), 0, time.Now())
		id := fmt.Sprintf("%s%064d", name, i)[:64]
		c := engine.Container{ID: id, Name: "lp-" + name, Image: "lp-e2e/writer:1", StartedAt: started, Pid: 100 + i,
			Driver: "overlay2", UpperDir: upper}
		switch name {
		case "writer":
			writeFile(t, filepath.Join(upper, "data/out/blob"), 3*mib, time.Now())
		case "vol":
			c.Mounts = []engine.Mount{{Type: "volume", Name: "lpvol", Source: s.volume, Destination: "/data", Driver: "local", RW: true}}
		case "bind":
			c.Mounts = []engine.Mount{{Type: "bind", Source: s.bind, Destination: "/data", RW: true},
				{Type: "bind", Source: s.volume, Destination: "/ro", RW: false},
				{Type: "tmpfs", Destination: "/run", RW: true}}
		case "pg":
			c.Image = "lp-e2e/postgres:16"
			writeFile(t, filepath.Join(upper, "var/lib/postgresql/data/PG_VERSION"), 3, time.Now())
		}
		h.process(c.Pid, cgroupV1, "/docker/"+id)
		written := map[string]int64{"writer": 3*mib + 4096, "vol": 3 * mib, "bind": 3 * mib, "idle": 0, "pg": 8192}[name]
		h.write(filepath.Join(h.cg, "blkio", "docker", id, "blkio.throttle.io_service_bytes_recursive"),
			fmt.Sprintf("254:0 Read 0\n254:0 Write %d\n254:0 Total %d\nTotal %d\n", written, written, written))
		s.eng.containers = append(s.eng.containers, c)
	}
	return s
}

func (s *scene) advisor(cfg Config) *Advisor {
	a := New(cfg, testharness.Logger(s.h.t))
	a.procRoot = s.h.proc
	return a
}

var testConfig = Config{MinLayerBytes: mib, WalkMaxEntries: 10000, WalkMaxTime: 10 * time.Second, PassMaxTime: time.Minute}

func byName(cs []api.Container) map[string]api.Container {
	out := map[string]api.Container{}
	for _, c := range cs {
		out[strings.TrimPrefix(c.Name, "lp-")] = c
	}
	return out
}

func TestPassRanksAndAttributes(t *testing.T) {
	s := newScene(t)
	a := s.advisor(testConfig)
	got := a.Pass(context.Background(), s.eng, Input{Engine: "default", Info: engine.Info{Driver: "overlay2"}})
	if got.Error != "" || got.ObservedAt == nil || got.Pass == nil || got.Engine != "default" || got.Driver != "overlay2" {
		t.Fatalf("pass = %+v", got)
	}
	if len(s.eng.asked) != 1 || s.eng.asked[0] != "PGDATA" {
		t.Errorf("the advisor asked the engine for the environment variables %v, want only PGDATA", s.eng.asked)
	}
	cs := byName(got.Containers)
	if len(cs) != 5 || got.Containers[0].Name != "lp-writer" || got.Containers[0].Rank != 1 {
		t.Fatalf("containers %+v, want 5 with lp-writer first", got.Containers)
	}

	w := cs["writer"]
	if w.Layer.Bytes != 3*mib || !w.Layer.Exact || w.Layer.Source != SourceUpperDir || len(w.Layer.TopPaths) == 0 ||
		w.Layer.TopPaths[0].Path != "/data/out" {
		t.Errorf("writer layer %+v", w.Layer)
	}
	if len(w.WritesLand) != 1 || w.WritesLand[0].Where != "layer" || w.BlockIO == nil || w.BlockIO.Bytes != 3*mib+4096 ||
		w.BlockIO.Cgroup != cgroupV1 || !strings.Contains(w.BlockIO.Note, "cgroup v1") {
		t.Errorf("writer: lands %+v, block %+v", w.WritesLand, w.BlockIO)
	}
	if len(w.Advice) != 1 || w.Advice[0].Path != "/data/out" || w.Cost != nil {
		t.Errorf("writer advice %+v, cost %+v (no measurements: no cost)", w.Advice, w.Cost)
	}

	v := cs["vol"]
	if v.Layer.Bytes != 0 || len(v.WritesLand) != 1 || v.WritesLand[0].Where != "volume" || v.WritesLand[0].Name != "lpvol" ||
		v.WritesLand[0].Bytes != 3*mib || len(v.Advice) != 0 {
		t.Errorf("volume writer: layer %d, lands %+v, advice %+v", v.Layer.Bytes, v.WritesLand, v.Advice)
	}
	if m := v.Mounts[0]; m.Bytes == nil || *m.Bytes != 8*mib || *m.ModifiedBytes != 3*mib || !m.Exact {
		t.Errorf("volume mount %+v, want 8 MiB of which 3 MiB modified since the start", m)
	}
	b := cs["bind"]
	if len(b.WritesLand) != 1 || b.WritesLand[0].Where != "bind" || b.WritesLand[0].Source != s.bind || b.WritesLand[0].Destination != "/data" {
		t.Errorf("bind writer lands %+v", b.WritesLand)
	}
	if len(b.Mounts) != 3 || b.Mounts[1].Bytes != nil || !strings.Contains(b.Mounts[1].Note, "read-only") ||
		b.Mounts[2].Bytes != nil || !strings.Contains(b.Mounts[2].Note, "tmpfs") {
		t.Errorf("bind writer's other mounts: %+v", b.Mounts)
	}
	if i := cs["idle"]; len(i.WritesLand) != 0 || len(i.Advice) != 0 || i.Database != nil || i.UnattributedBytes == nil || *i.UnattributedBytes != 0 {
		t.Errorf("idle: %+v", i)
	}
	pg := cs["pg"]
	if pg.Database == nil || pg.Database.Name != "postgres" || !pg.Database.InLayer || len(pg.Advice) != 1 ||
		pg.Advice[0].Kind != AdviceDatabaseInLayer || pg.Advice[0].Path != "/var/lib/postgresql/data" {
		t.Errorf("postgres: database %+v, advice %+v", pg.Database, pg.Advice)
	}
	if p := got.Pass; p.Containers != 5 || p.Entries < 10 || p.Capped != 0 {
		t.Errorf("pass %+v", p)
	}
	for _, c := range got.Containers {
		if c.Layer.GrowthBytes != nil || (c.BlockIO != nil && c.BlockIO.GrowthBytes != nil) {
			t.Errorf("%s: growth on the first pass", c.Name)
		}
	}

	// Second pass: growth since the first; a container that went away is
	// forgotten.
	writeFile(t, filepath.Join(s.upper["writer"], "data/out/more"), mib, time.Now())
	s.eng.containers = s.eng.containers[:4]
	got = a.Pass(context.Background(), s.eng, Input{Engine: "default"})
	w = byName(got.Containers)["writer"]
	if w.Layer.GrowthBytes == nil || *w.Layer.GrowthBytes != mib || w.Layer.GrowthSeconds <= 0 ||
		w.BlockIO.GrowthBytes == nil || *w.BlockIO.GrowthBytes != 0 {
		t.Errorf("second pass: layer %+v, block %+v", w.Layer, w.BlockIO)
	}
	if len(a.prev) != 4 {
		t.Errorf("the advisor remembers %d containers, want the 4 still running", len(a.prev))
	}
}

func TestPassBounds(t *testing.T) {
	s := newScene(t)
	for i := range 200 {
		writeFile(t, filepath.Join(s.upper["writer"], "many", fmt.Sprint(i)), 10, time.Now())
	}
	cfg := testConfig
	cfg.WalkMaxEntries = 50
	got := s.advisor(cfg).Pass(context.Background(), s.eng, Input{Engine: "default"})
	w := byName(got.Containers)["writer"]
	if w.Layer.Exact || !strings.Contains(w.Layer.Note, "walk_max_entries") || got.Pass.Capped < 1 {
		t.Errorf("capped walk: layer %+v, pass %+v", w.Layer, got.Pass)
	}
	if got.Pass.Entries > int64(cfg.WalkMaxEntries)*5 {
		t.Errorf("walked %d entries, more than 5 containers x %d", got.Pass.Entries, cfg.WalkMaxEntries)
	}

	// A pass past its time cap lists the rest without walking them.
	cfg = testConfig
	a := s.advisor(cfg)
	clock := time.Now()
	a.now = func() time.Time { clock = clock.Add(20 * time.Second); return clock }
	got = a.Pass(context.Background(), s.eng, Input{Engine: "default"})
	var unwalked int
	for _, c := range got.Containers {
		if c.Layer.Source == SourceNone && strings.Contains(c.Layer.Note, "pass_max_time") {
			unwalked++
		}
	}
	if len(got.Containers) != 5 || unwalked == 0 || unwalked == 5 {
		t.Errorf("past the pass cap: %d of %d containers unwalked, want some but not all", unwalked, len(got.Containers))
	}
}

func TestPassWithoutUpperDir(t *testing.T) {
	s := newScene(t)
	for i := range s.eng.containers {
		s.eng.containers[i].UpperDir = ""
		s.eng.containers[i].Driver = "btrfs"
	}
	s.eng.sizes[s.eng.containers[0].ID] = 3 * mib
	got := s.advisor(testConfig).Pass(context.Background(), s.eng, Input{Engine: "default"})
	cs := byName(got.Containers)
	if w := cs["writer"]; w.Layer.Source != SourceEngine || !w.Layer.Exact || w.Layer.Bytes != 3*mib || len(w.Layer.TopPaths) != 0 ||
		len(w.Advice) != 1 || !strings.Contains(w.Advice[0].Message, "docker diff lp-writer") {
		t.Errorf("engine-sized writer: layer %+v, advice %+v", w.Layer, w.Advice)
	}
	if v := cs["vol"]; v.Layer.Source != SourceNone || !strings.Contains(v.Layer.Note, "no size") {
		t.Errorf("no size from the engine: %+v", v.Layer)
	}
}

func TestPassListFailure(t *testing.T) {
	s := newScene(t)
	s.eng.listErr = errors.New("cannot reach Docker engine at unix:///nowhere: no such socket")
	got := s.advisor(testConfig).Pass(context.Background(), s.eng, Input{Engine: "default"})
	if !strings.Contains(got.Error, "no such socket") || len(got.Containers) != 0 || got.ObservedAt != nil {
		t.Errorf("failed list: %+v", got)
	}
}
