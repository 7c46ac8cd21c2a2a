package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// adviseMiB is what each writer writes: into its layer, a named volume or
// a bind mount.
const adviseMiB = 64

// adviseScene is a private daemon running the advisor's test containers.
type adviseScene struct {
	d      *testdaemon.Daemon
	docker apiClient
	bind   string            // the bind writer's host directory
	ids    map[string]string // container name -> ID
}

// Container names of the scene.
const (
	ctLayer  = "lp-layer"
	ctVolume = "lp-volume"
	ctBind   = "lp-bind"
	ctIdle   = "lp-idle"
	ctPG     = "lp-postgres"
)

// newAdviseScene starts a daemon and, from an image built here (nothing is
// pulled), a container that writes adviseMiB into its layer, one into a
// named volume, one into a bind mount, an idle one, and one of an image
// named like postgres that has written almost nothing into its data
// directory, which is on no volume. It returns once every writer is done.
func newAdviseScene(t *testing.T, opts testdaemon.Options) *adviseScene {
	t.Helper()
	s := &adviseScene{d: testdaemon.Start(t, opts), bind: t.TempDir(), ids: map[string]string{}}
	s.docker = newAPI(s.d.Host)
	s.docker.ImportWorkload(t, "lp-e2e/writer:1", "lp-e2e/postgres:16")
	s.docker.Post(t, "/volumes/create", map[string]any{"Name": "lpvol"}, nil)
	size := fmt.Sprintf("%dMiB", adviseMiB)
	run := func(name, image string, cmd []string, mounts ...map[string]any) {
		s.ids[name] = s.docker.RunContainer(t, name, image, cmd, mounts...)
	}
	run(ctLayer, "lp-e2e/writer:1", []string{"write", "/data/out/blob", size})
	run(ctVolume, "lp-e2e/writer:1", []string{"write", "/data/out/blob", size}, map[string]any{"Type": "volume", "Source": "lpvol", "Target": "/data"})
	run(ctBind, "lp-e2e/writer:1", []string{"write", "/data/out/blob", size}, map[string]any{"Type": "bind", "Source": s.bind, "Target": "/data"})
	run(ctIdle, "lp-e2e/writer:1", []string{"idle"})
	run(ctPG, "lp-e2e/postgres:16", []string{"write", "/var/lib/postgresql/data/PG_VERSION", "3"})
	for _, name := range []string{ctLayer, ctVolume, ctBind, ctPG} {
		testharness.WaitFor(t, 3*time.Minute, name+" done writing", func() bool {
			return strings.Contains(s.docker.Logs(t, s.ids[name]), "done ")
		})
	}
	return s
}

// state is what "untouched" compares: a container's process, start, exec
// instances, restarts and pause state.
type state struct {
	Running, Paused bool
	Pid             int
	StartedAt       string
	RestartCount    int
	ExecIDs         []string
}

func (s *adviseScene) states(t *testing.T) map[string]state {
	out := map[string]state{}
	for name, id := range s.ids {
		var in struct {
			State struct {
				Running, Paused bool
				Pid             int
				StartedAt       string
			}
			RestartCount int
			ExecIDs      []string
		}
		s.docker.get(t, "/containers/"+id+"/json", &in)
		out[name] = state{Running: in.State.Running, Paused: in.State.Paused, Pid: in.State.Pid, StartedAt: in.State.StartedAt,
			RestartCount: in.RestartCount, ExecIDs: in.ExecIDs}
	}
	return out
}

// logStartRace logs how long after the engine recorded the bind writer's
// start its file was last modified: a writer this quick can finish before
// the record (a negative figure), which the advisor's start time allows for.
func (s *adviseScene) logStartRace(t *testing.T, st state) {
	t.Helper()
	started, err := time.Parse(time.RFC3339Nano, st.StartedAt)
	fi, serr := os.Stat(filepath.Join(s.bind, "out", "blob"))
	if err != nil || serr != nil {
		t.Errorf("bind writer: StartedAt %q (%v), file %v", st.StartedAt, err, serr)
		return
	}
	t.Logf("bind writer's file last modified %+.3f s after the engine's StartedAt", fi.ModTime().Sub(started).Seconds())
}

// untouched checks that nothing happened to the containers between since
// and now: no event of any kind on them (exec, pause, kill, ...), the same
// processes, and the bind writer's file as it was.
func (s *adviseScene) untouched(t *testing.T, before map[string]state, since time.Time) {
	t.Helper()
	after := s.states(t)
	for name, b := range before {
		a := after[name]
		if !a.Running || a.Paused || a.Pid != b.Pid || a.StartedAt != b.StartedAt || a.RestartCount != b.RestartCount ||
			len(a.ExecIDs) != 0 || len(b.ExecIDs) != 0 {
			t.Errorf("%s changed: before %+v, after %+v", name, b, a)
		}
	}
	ids := make([]string, 0, len(s.ids))
	for _, id := range s.ids {
		ids = append(ids, id)
	}
	for _, ev := range s.docker.Events(t, since, time.Now(), map[string][]string{"container": ids}) {
		t.Errorf("event on a test container while the advisor looked: %v", ev)
	}
	if fi, err := os.Stat(filepath.Join(s.bind, "out", "blob")); err != nil || fi.Size() != adviseMiB<<20 {
		t.Errorf("the bind writer's file: %v, %v", fi, err)
	}
}

// checkAdvice checks one engine's answer against the scene: the layer
// writer first with its layer within 10% of what it wrote, the others
// attributed to their volume or bind mount, the database flagged.
func (s *adviseScene) checkAdvice(t *testing.T, e api.EngineContainers, wantPaths bool) {
	t.Helper()
	if e.Error != "" || e.ObservedAt == nil || e.Pass == nil {
		t.Fatalf("engine answer: %+v", e)
	}
	cs := map[string]api.Container{}
	for _, c := range e.Containers {
		cs[c.Name] = c
	}
	for name := range s.ids {
		if _, ok := cs[name]; !ok {
			t.Errorf("%s is not listed; listed: %v", name, slices.Collect(maps.Keys(cs)))
		}
	}
	if len(e.Containers) != len(s.ids) {
		t.Errorf("%d containers listed, want %d (the probe container is not the user's)", len(e.Containers), len(s.ids))
	}
	const n = adviseMiB << 20
	within := func(got int64) bool { return math.Abs(float64(got)-n) <= 0.1*n }

	l := cs[ctLayer]
	if l.Rank != 1 || !within(l.Layer.Bytes) || !l.Layer.Exact {
		t.Errorf("layer writer: rank %d, layer %+v; want rank 1 and %d MiB ± 10%%, exact", l.Rank, l.Layer, adviseMiB)
	}
	if len(l.WritesLand) == 0 || l.WritesLand[0].Where != "layer" || !within(l.WritesLand[0].Bytes) {
		t.Errorf("layer writer's writes land %+v, want the layer first", l.WritesLand)
	}
	if len(l.Advice) == 0 || l.Advice[0].Kind != "layer_writes" {
		t.Errorf("layer writer's advice %+v", l.Advice)
	}
	if wantPaths && (len(l.Layer.TopPaths) == 0 || l.Layer.TopPaths[0].Path != "/data/out" || l.Advice[0].Path != "/data/out") {
		t.Errorf("layer writer's paths %+v, advice %+v; want /data/out", l.Layer.TopPaths, l.Advice)
	}

	for name, want := range map[string]api.Landing{
		ctVolume: {Where: "volume", Name: "lpvol", Destination: "/data"},
		ctBind:   {Where: "bind", Source: s.bind, Destination: "/data"},
	} {
		c := cs[name]
		if c.Layer.Bytes > n/10 || len(c.WritesLand) != 1 {
			t.Errorf("%s: layer %d bytes, writes land %+v; want the layer nearly empty and one landing", name, c.Layer.Bytes, c.WritesLand)
			continue
		}
		got := c.WritesLand[0]
		if got.Where != want.Where || got.Destination != want.Destination || (want.Name != "" && got.Name != want.Name) ||
			(want.Source != "" && got.Source != want.Source) || !within(got.Bytes) || got.Exact {
			t.Errorf("%s lands %+v, want %+v with %d MiB ± 10%%, an estimate", name, got, want, adviseMiB)
		}
		if len(c.Advice) != 0 || c.Rank == 1 {
			t.Errorf("%s: rank %d, advice %+v; want no advice", name, c.Rank, c.Advice)
		}
	}
	if c := cs[ctIdle]; len(c.WritesLand) != 0 || len(c.Advice) != 0 || c.Database != nil {
		t.Errorf("idle: %+v", c)
	}
	pg := cs[ctPG]
	if pg.Database == nil || pg.Database.Name != "postgres" || !pg.Database.InLayer || len(pg.Advice) != 1 ||
		pg.Advice[0].Kind != "database_in_layer" || !strings.Contains(pg.Advice[0].Message, "/var/lib/postgresql/data") {
		t.Errorf("postgres: database %+v, advice %+v", pg.Database, pg.Advice)
	}
	for _, c := range e.Containers {
		t.Logf("%d %-12s layer %9d (%s, exact %v) block %v lands %v mounts %s", c.Rank, c.Name, c.Layer.Bytes, c.Layer.Source, c.Layer.Exact,
			blockOf(c), c.WritesLand, mountsOf(c))
	}
	t.Logf("pass: %.3f s, %.3f s CPU, %d B read, %d entries", e.Pass.DurationSeconds, e.Pass.CPUSeconds, e.Pass.ReadBytes, e.Pass.Entries)
}

// mountsOf says, for the log, what the walk of each mount found: its bytes
// and the part modified since the container started.
func mountsOf(c api.Container) string {
	var b strings.Builder
	for _, m := range c.Mounts {
		fmt.Fprintf(&b, "[%s %s: %s of %s modified]", m.Type, m.Destination, optInt(m.ModifiedBytes), optInt(m.Bytes))
		if m.Note != "" {
			fmt.Fprintf(&b, "(%s)", m.Note)
		}
	}
	return b.String()
}

func optInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func blockOf(c api.Container) any {
	if c.BlockIO == nil {
		return "-"
	}
	return c.BlockIO.Bytes
}

// advise runs `layerprobe advise` once as JSON and once as a table.
func (s *adviseScene) advise(t *testing.T, stateDir string) (api.ContainersResponse, string) {
	t.Helper()
	res := layerprobe(t, s.d.Host, 2*time.Minute, "advise", "--output", "json", "--state-dir", stateDir)
	if res.code != 0 {
		t.Fatalf("layerprobe advise --output json: exit %d: %s", res.code, res.stderr)
	}
	var r api.ContainersResponse
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatalf("advise JSON: %v\n%s", err, res.stdout)
	}
	table := layerprobe(t, s.d.Host, 2*time.Minute, "advise", "--state-dir", stateDir)
	if table.code != 0 {
		t.Fatalf("layerprobe advise: exit %d: %s", table.code, table.stderr)
	}
	return r, table.stdout
}

// TestAdvise: `layerprobe advise` on overlay2 and on btrfs ranks the layer
// writer first with its layer within 10% of what it wrote, attributes the
// volume and bind writers to their mounts, flags the database, and leaves
// every container as it was.
func TestAdvise(t *testing.T) {
	queue.Parallel(t) // its own private engines: runs beside the other parallel tests, after the sequential ones
	for _, c := range []struct {
		name  string
		opts  testdaemon.Options
		paths bool // the driver has an upper directory: paths are named
	}{
		{"overlay2", testdaemon.Options{Driver: "overlay2"}, true},
		{"btrfs", testdaemon.Options{Driver: "btrfs", Backing: "btrfs", SizeMiB: 2048}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newAdviseScene(t, c.opts)
			before := s.states(t)
			s.logStartRace(t, before[ctBind])
			since := time.Now()
			r, table := s.advise(t, t.TempDir())
			t.Logf("layerprobe advise:\n%s", table)
			if len(r.Engines) != 1 {
				t.Fatalf("advise answered %d engines", len(r.Engines))
			}
			if e := r.Engines[0]; e.Driver != c.name || len(e.LayerVsVolume) != 0 {
				t.Errorf("driver %q, layer vs volume %+v; want %s and no measurements (empty state directory)", e.Driver, e.LayerVsVolume, c.name)
			}
			s.checkAdvice(t, r.Engines[0], c.paths)
			for _, want := range []string{ctLayer, "DATA IN LAYER", "Advice:", "mount a volume", "volume lpvol at /data"} {
				if !strings.Contains(table, want) {
					t.Errorf("the table lacks %q", want)
				}
			}
			s.untouched(t, before, since)
		})
	}
}

// adviseAgentConfig: the e2e agent, with two per-container series.
// Six rounds a cycle: the second cycle's pass has the 6 round pairs a 95%
// interval needs, below which the layer's cost is withheld. The layer
// writer's cost is priced from seqwrite alone, so the agent measures that
// workload alone (a quarter of the cycle).
var adviseAgentConfig = strings.Replace(agentConfig, "rounds_per_cycle: 2", "rounds_per_cycle: 6", 1) + `
workloads: [seqwrite]
advisor:
  metrics_top_n: 2
`

// TestAdvisorInTheAgent: the agent runs a pass with every cycle and
// serves it as GET /api/v1/containers (with the layer's measured cost once
// it has rounds) and as metrics for the top two containers, the rest
// summed; a container that goes away loses its series. `layerprobe advise`
// beside the running agent reads the agent's rounds for the cost.
func TestAdvisorInTheAgent(t *testing.T) {
	queue.Parallel(t) // its own private engines: runs beside the other parallel tests, after the sequential ones
	s := newAdviseScene(t, testdaemon.Options{Driver: "overlay2"})
	before := s.states(t)
	since := time.Now()
	setup := newAgentSetup(t, s.d.Host, adviseAgentConfig)
	a := setup.start(t)
	a.waitCycles(t, "ok", 1, 3*time.Minute)

	var r api.ContainersResponse
	a.getJSON(t, "/api/v1/containers", &r)
	if len(r.Engines) != 1 {
		t.Fatalf("GET /api/v1/containers: %+v", r)
	}
	s.checkAdvice(t, r.Engines[0], true)
	// The pass ran before the first cycle measured anything: no cost yet.
	// The second cycle's pass has the first's rounds.
	if code, body := a.do(t, "POST", "/api/v1/cycles", setup.token); code != 202 {
		t.Fatalf("POST /api/v1/cycles: %d %v", code, body)
	}
	a.waitCycles(t, "ok", 2, 3*time.Minute)
	a.getJSON(t, "/api/v1/containers?engine=default", &r)
	e := r.Engines[0]
	if len(e.LayerVsVolume) == 0 {
		t.Errorf("no layer-vs-volume figures after a cycle")
	}
	for _, c := range e.Containers {
		if c.Name == ctLayer && (c.Cost == nil || c.Cost.Workload != "seqwrite" || c.Cost.Low > c.Cost.ExtraSeconds || c.Cost.High < c.Cost.ExtraSeconds ||
			c.Layer.GrowthBytes == nil) {
			t.Errorf("layer writer after two passes: cost %+v, growth %v", c.Cost, c.Layer.GrowthBytes)
		}
	}
	for _, l := range e.LayerVsVolume {
		t.Logf("layer vs volume, %s: %+.3f [%+.3f, %+.3f] over %d rounds, volume writes %.0f MiB/s",
			l.Workload, l.Slowdown, l.SlowdownLow, l.SlowdownHigh, l.Rounds, l.VolumeWriteBytesPerSecond/(1<<20))
	}
	for _, path := range []string{"/api/v1/containers?engine=Bad..Name", "/api/v1/containers?limit=1"} {
		if code, body := a.do(t, "GET", path, ""); code != 400 || !strings.Contains(fmt.Sprint(body), "bad_parameter") {
			t.Errorf("GET %s: %d %v, want 400 bad_parameter", path, code, body)
		}
	}

	// Metrics: the top two by layer bytes (the layer writer, then the
	// database with its few bytes), the other three summed.
	_, series := a.scrape(t)
	top := containerSeries(series, "layerprobe_container_layer_written_bytes")
	if !slices.Equal(top, []string{"_other", ctLayer, ctPG}) {
		t.Errorf("layer series for %v, want _other, %s and %s", top, ctLayer, ctPG)
	}
	if v, ok := series.Find("layerprobe_databases_in_layer", nil); !ok || v != 1 {
		t.Errorf("layerprobe_databases_in_layer = %v (%v), want 1", v, ok)
	}
	if v, ok := series.Find("layerprobe_container_database_in_layer", map[string]string{"container": ctPG, "database": "postgres"}); !ok || v != 1 {
		t.Errorf("database series of %s = %v (%v), want 1", ctPG, v, ok)
	}
	if v, ok := series.Find("layerprobe_containers", nil); !ok || v != 5 {
		t.Errorf("layerprobe_containers = %v (%v), want 5", v, ok)
	}

	// `layerprobe advise` beside the agent reads its rounds.
	res := layerprobe(t, s.d.Host, 2*time.Minute, "advise", "--state-dir", setup.StateDir)
	if res.code != 0 || !strings.Contains(res.stdout, "layer vs volume (extra time per byte") || !strings.Contains(res.stdout, "as seqwrite") {
		t.Errorf("advise beside the agent: exit %d, %s\n%s", res.code, res.stderr, res.stdout)
	}
	t.Logf("layerprobe advise beside the agent:\n%s", res.stdout)
	s.untouched(t, before, since)

	// The layer writer goes away: with the next pass its series go too.
	s.docker.Raw(t, "DELETE", "/containers/"+s.ids[ctLayer]+"?force=1", "", nil)
	delete(s.ids, ctLayer)
	if code, body := a.do(t, "POST", "/api/v1/cycles", setup.token); code != 202 {
		t.Fatalf("POST /api/v1/cycles: %d %v", code, body)
	}
	a.waitCycles(t, "ok", 3, 3*time.Minute)
	_, series = a.scrape(t)
	if top := containerSeries(series, "layerprobe_container_layer_written_bytes"); slices.Contains(top, ctLayer) || len(top) != 3 {
		t.Errorf("after the layer writer went away, layer series for %v", top)
	}
	if v, ok := series.Find("layerprobe_containers", nil); !ok || v != 4 {
		t.Errorf("layerprobe_containers = %v (%v), want 4", v, ok)
	}
}

// containerSeries lists the container label values of a metric, sorted.
func containerSeries(ms testharness.Metrics, name string) []string {
	return slices.Sorted(maps.Keys(ms.ByLabel(name, "container")))
}
