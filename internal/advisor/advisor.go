// Package advisor finds the containers that pay the writable layer's tax:
// per running container, what it wrote into its writable layer, where the
// rest of its writes went (volumes, bind mounts), whether it is a known
// database or queue keeping its data in the layer, and what the layer cost
// it on this host, with a concrete suggestion.
//
// It is read-only towards the containers: it lists and inspects them
// through the engine, walks their upper directories and mount sources on
// the host, and reads their cgroups' block I/O counters. It never execs
// into, pauses or otherwise touches a container. Every walk is bounded by
// an entry cap and a time cap per container, and a pass by a time cap.
package advisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// Engine is what the advisor asks of a container engine. engine.Client
// has it: *docker.Client and *containerd.Client are.
type Engine interface {
	Containers(ctx context.Context, env []string) ([]engine.Container, error)
	ContainerLayerSize(ctx context.Context, id string) (int64, error)
}

// Config bounds and tunes a pass.
type Config struct {
	// MinLayerBytes is the least a container must have in its layer to get
	// advice about it (a database in its layer gets advice regardless).
	MinLayerBytes int64
	// WalkMaxEntries and WalkMaxTime cap the walks of one container (its
	// layer and its mounts together); PassMaxTime caps a whole pass, after
	// which the remaining containers are listed without walks.
	WalkMaxEntries int64
	WalkMaxTime    time.Duration
	PassMaxTime    time.Duration
	// TopPaths is how many growing paths to name per layer; 0 means 3.
	TopPaths int
}

// FromConfig is the advisor's configuration from the file's.
func FromConfig(c config.Advisor) Config {
	return Config{MinLayerBytes: int64(c.MinLayerBytes), WalkMaxEntries: int64(c.WalkMaxEntries),
		WalkMaxTime: c.WalkMaxTime, PassMaxTime: c.PassMaxTime}
}

// Source values of api.LayerWrites.
const (
	SourceUpperDir = "upper_dir"
	SourceEngine   = "engine"
	SourceNone     = "none"
)

// listTimeout bounds listing and inspecting an engine's containers.
const listTimeout = 30 * time.Second

// Advisor runs passes over one engine and remembers the previous one, for
// the growth between passes. A pass at a time: it is not safe for
// concurrent use.
type Advisor struct {
	cfg      Config
	logger   *slog.Logger
	procRoot string
	sysRoot  string
	now      func() time.Time
	prev     map[string]observation // by container ID
}

// observation is what a pass saw of a container, for the next one.
type observation struct {
	at        time.Time
	startedAt time.Time
	layer     int64
	block     *int64
}

// New returns an advisor for one engine.
func New(cfg Config, logger *slog.Logger) *Advisor {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TopPaths <= 0 {
		cfg.TopPaths = 3
	}
	return &Advisor{cfg: cfg, logger: logger, procRoot: "/proc", sysRoot: "/sys", now: time.Now,
		prev: map[string]observation{}}
}

// Input is what a pass needs besides the engine.
type Input struct {
	Engine string      // the configured engine name
	Info   engine.Info // what the engine is: driver and data root
	// Samples are the measured rounds the layer's cost comes from (the
	// agent's window); none leaves the cost out.
	Samples    []measure.Sample
	Confidence float64 // of the layer-vs-volume intervals
}

// Pass looks at every running container of the engine once. A failure to
// list them is reported in the answer's Error; a failure to measure one
// container is a note on that container.
func (a *Advisor) Pass(ctx context.Context, eng Engine, in Input) api.EngineContainers {
	start := a.now()
	usage0 := a.usage()
	out := api.EngineContainers{Engine: in.Engine, Driver: in.Info.Driver, LayerVsVolume: []api.LayerOverhead{},
		Containers: []api.Container{}}
	if len(in.Samples) > 0 {
		out.LayerVsVolume = LayerVsVolume(in.Samples, in.Confidence)
	}
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	list, err := eng.Containers(lctx, databaseEnv())
	cancel()
	if err != nil {
		out.Error = err.Error()
		return out
	}

	p := &pass{a: a, eng: eng, in: in, overheads: out.LayerVsVolume,
		cg: cgroups{procRoot: a.procRoot}, devs: devices{sysRoot: a.sysRoot}, boot: bootTime(a.procRoot), stats: &api.AdvisorPass{}}
	if a.cfg.PassMaxTime > 0 {
		p.deadline = start.Add(a.cfg.PassMaxTime)
	}
	if in.Info.DataRoot != "" {
		if dev, err := p.devs.of(in.Info.DataRoot); err == nil {
			p.dataDev = dev
		} else {
			a.logger.Debug("advisor: cannot name the data root's disk; block writes count every device", "err", err)
		}
	}
	next := make(map[string]observation, len(list))
	for _, c := range list {
		if ctx.Err() != nil {
			break
		}
		ac, obs := p.container(ctx, c)
		out.Containers = append(out.Containers, ac)
		next[c.ID] = obs
	}
	// Containers that went away take their history with them.
	a.prev = next
	rank(out.Containers)

	usage1 := a.usage()
	end := a.now()
	p.stats.DurationSeconds = end.Sub(start).Seconds()
	p.stats.CPUSeconds = max(usage1.cpu-usage0.cpu, 0)
	p.stats.ReadBytes = max(usage1.read-usage0.read, 0)
	p.stats.Containers = len(out.Containers)
	out.Pass = p.stats
	at := end.UTC()
	out.ObservedAt = &at
	a.logger.Debug("advisor pass", "engine", in.Engine, "containers", p.stats.Containers, "entries", p.stats.Entries,
		"capped", p.stats.Capped, "duration_seconds", p.stats.DurationSeconds, "cpu_seconds", p.stats.CPUSeconds,
		"read_bytes", p.stats.ReadBytes)
	return out
}

// pass is one pass in progress.
type pass struct {
	a         *Advisor
	eng       Engine
	in        Input
	overheads []api.LayerOverhead
	deadline  time.Time // of the pass; zero: none
	cg        cgroups
	devs      devices
	dataDev   string    // the data root's disk, "" when unknown
	boot      time.Time // the system's boot, for process start times (writesSince); zero when unknown
	stats     *api.AdvisorPass
}

// container measures one container.
func (p *pass) container(ctx context.Context, c engine.Container) (api.Container, observation) {
	a := p.a
	now := a.now()
	out := api.Container{ID: c.ID, Name: c.Name, Image: c.Image, StartedAt: c.StartedAt.UTC(),
		Mounts: []api.MountWrites{}, WritesLand: []api.Landing{}, Advice: []api.Advice{},
		Layer: api.LayerWrites{Source: SourceNone, TopPaths: []api.PathBytes{}}}
	b := &budget{maxEntries: a.cfg.WalkMaxEntries, now: a.now}
	if a.cfg.WalkMaxTime > 0 {
		b.deadline = now.Add(a.cfg.WalkMaxTime)
	}
	if !p.deadline.IsZero() && (b.deadline.IsZero() || b.deadline.After(p.deadline)) {
		b.deadline = p.deadline
	}
	walks := p.deadline.IsZero() || now.Before(p.deadline)
	since := writesSince(a.procRoot, p.boot, c.Pid, c.StartedAt)

	out.Layer = p.layer(ctx, c, since, b, walks)
	for _, m := range c.Mounts {
		out.Mounts = append(out.Mounts, p.mount(m, since, b, walks))
	}
	out.BlockIO = p.block(c)
	if b.hit != "" {
		p.stats.Capped++
	}
	p.stats.Entries += b.walked()

	if name, dirs, ok := databaseOf(c.Image, c.Env); ok {
		dests := make([]string, 0, len(c.Mounts))
		for _, m := range c.Mounts {
			dests = append(dests, m.Destination)
		}
		inLayer := !slices.ContainsFunc(dirs, func(d string) bool { return covered(d, dests) })
		out.Database = &api.Database{Name: name, DataDirs: dirs, InLayer: inLayer}
	}
	out.WritesLand, out.UnattributedBytes = landings(out.Layer, out.BlockIO, out.Mounts)
	if out.WritesLand == nil {
		out.WritesLand = []api.Landing{}
	}
	out.Cost = costOf(out.Layer.Bytes, jobFor(&out), p.overheads)
	out.Advice = adviceFor(&out, a.cfg.MinLayerBytes)
	if adv, ok := smallFilesAdvice(&out, p.overheads); ok {
		out.Advice = append(out.Advice, adv)
	}
	if out.Advice == nil {
		out.Advice = []api.Advice{}
	}

	obs := observation{at: now, startedAt: c.StartedAt, layer: out.Layer.Bytes}
	if out.BlockIO != nil {
		n := out.BlockIO.Bytes
		obs.block = &n
	}
	if prev, ok := a.prev[c.ID]; ok {
		g := out.Layer.Bytes - prev.layer
		out.Layer.GrowthBytes = &g
		out.Layer.GrowthSeconds = now.Sub(prev.at).Seconds()
		// Block counters start again with every start of the container.
		if out.BlockIO != nil && prev.block != nil && prev.startedAt.Equal(c.StartedAt) {
			bg := out.BlockIO.Bytes - *prev.block
			out.BlockIO.GrowthBytes = &bg
		}
	}
	return out, obs
}

// layer measures the writable layer: a bounded walk of the upper directory
// where the driver has one, else the engine's own figure.
func (p *pass) layer(ctx context.Context, c engine.Container, since time.Time, b *budget, walks bool) api.LayerWrites {
	lw := api.LayerWrites{Source: SourceNone, TopPaths: []api.PathBytes{}}
	if !walks {
		lw.Note = "not measured: the pass reached its time cap (advisor.pass_max_time)"
		return lw
	}
	if c.UpperDir == "" {
		return p.engineSize(ctx, c, lw, "")
	}
	r := walkTree(c.UpperDir, since, b, true)
	lw.Source, lw.Bytes, lw.Entries, lw.Exact = SourceUpperDir, r.Bytes, r.Entries, r.Stop == ""
	lw.TopPaths = topPaths(r.tree, p.a.cfg.TopPaths)
	if lw.TopPaths == nil {
		lw.TopPaths = []api.PathBytes{}
	}
	switch r.Stop {
	case "":
	case stopPermission:
		// Directories this process may not read (a database's 0700 data
		// directory, with the agent's capabilities dropped): the engine,
		// which may, has the size. The paths found stay.
		return p.engineSize(ctx, c, lw, "layerprobe may not read some of the upper directory's directories (give the agent CAP_DAC_READ_SEARCH to walk them); ")
	default:
		lw.Note = stopNote(r.Stop, "the upper directory", p.a.cfg)
	}
	return lw
}

// engineSize asks the engine for the layer's size, waiting at most the
// walk's time cap.
func (p *pass) engineSize(ctx context.Context, c engine.Container, lw api.LayerWrites, why string) api.LayerWrites {
	sctx, cancel := context.WithTimeout(ctx, max(p.a.cfg.WalkMaxTime, time.Second))
	defer cancel()
	n, err := p.eng.ContainerLayerSize(sctx, c.ID)
	if err != nil {
		if lw.Source == SourceUpperDir {
			lw.Note = why + "the engine did not give the size either, so this is a lower bound: " + err.Error()
			return lw
		}
		lw.Source, lw.Note = SourceNone, "the engine did not give the layer's size: "+err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			lw.Note = "the engine did not give the layer's size within " + max(p.a.cfg.WalkMaxTime, time.Second).String()
		}
		return lw
	}
	lw.Source, lw.Bytes, lw.Exact = SourceEngine, n, true
	if why != "" {
		lw.Note = why + "the size is the engine's; the paths are from the part walked"
	}
	return lw
}

// stopNote explains a walk that stopped short.
func stopNote(stop, what string, cfg Config) string {
	switch stop {
	case stopEntries:
		return fmt.Sprintf("a lower bound: the walk of %s stopped at %d entries (advisor.walk_max_entries)", what, cfg.WalkMaxEntries)
	case stopTime:
		return fmt.Sprintf("a lower bound: the walk of %s stopped after %s (advisor.walk_max_time)", what, cfg.WalkMaxTime)
	case stopPermission:
		return fmt.Sprintf("a lower bound: layerprobe may not read some directories of %s", what)
	}
	return fmt.Sprintf("a lower bound: some of %s could not be read", what)
}

// mount measures what a writable volume or bind mount holds on the host,
// and the part of it in files modified since (writesSince).
func (p *pass) mount(m engine.Mount, since time.Time, b *budget, walks bool) api.MountWrites {
	mw := api.MountWrites{Type: m.Type, Name: m.Name, Source: m.Source, Destination: m.Destination, RW: m.RW}
	switch {
	case !m.RW:
		mw.Note = "read-only: the container cannot write here"
		return mw
	case m.Type == "tmpfs":
		mw.Note = "tmpfs: memory, not disk"
		return mw
	case m.Source == "" || m.Type != "bind" && m.Type != "volume":
		mw.Note = "not measured: no host directory"
		return mw
	case m.Type == "volume" && m.Driver != "" && m.Driver != "local":
		mw.Note = "not measured: volume driver " + m.Driver + " keeps its data elsewhere"
		return mw
	case !walks:
		mw.Note = "not measured: the pass reached its time cap (advisor.pass_max_time)"
		return mw
	case b.hit != "":
		mw.Note = "not measured: the container's walks reached their cap (" + b.hit + ")"
		return mw
	}
	r := walkTree(m.Source, since, b, false)
	total, modified := r.Bytes, r.Since
	mw.Bytes, mw.ModifiedBytes, mw.Exact = &total, &modified, r.Stop == ""
	if r.Stop != "" {
		mw.Note = stopNote(r.Stop, "the mount's host directory", p.a.cfg)
	}
	return mw
}

// block reads the container's block writes from its cgroup, counting the
// data root's disk and the disks of its writable mounts.
func (p *pass) block(c engine.Container) *api.BlockWrites {
	var devs []string
	if p.dataDev != "" {
		devs = append(devs, p.dataDev)
		for _, m := range c.Mounts {
			if !m.RW || m.Source == "" || m.Type == "tmpfs" {
				continue
			}
			if d, err := p.devs.of(m.Source); err == nil && !slices.Contains(devs, d) {
				devs = append(devs, d)
			}
		}
	}
	w, err := p.cg.written(c.Pid, c.ID, devs)
	if err != nil {
		p.a.logger.Debug("advisor: no block writes", "container", c.Name, "err", err)
		return nil
	}
	bw := &api.BlockWrites{Bytes: w.bytes, Cgroup: w.version, Devices: devs}
	if bw.Devices == nil {
		bw.Devices = []string{}
	}
	var notes []string
	if w.version == cgroupV1 {
		notes = append(notes, noteV1)
	}
	if len(devs) == 0 {
		notes = append(notes, "the data root's disk could not be named, so every disk is counted")
	}
	bw.Note = strings.Join(notes, "; ")
	return bw
}

// usage is this process's CPU time and block-device reads so far.
type usage struct {
	cpu  float64
	read int64
}

// usage reads getrusage (microseconds, where /proc/self/stat counts clock
// ticks of 10 ms: a pass often takes less) and /proc/self/io.
func (a *Advisor) usage() usage {
	var u usage
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	fs, err := procfs.NewFS(a.procRoot)
	if err != nil {
		return u
	}
	self, err := fs.Self()
	if err != nil {
		return u
	}
	if io, err := self.IO(); err == nil {
		u.read = int64(io.ReadBytes)
	}
	return u
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
