package httpapi

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeSource serves data built from the real report types: samples with
// NaN latencies and failed rounds, summarized by measure.Summarize, so the
// API is tested on what the agent will really hand it.
type fakeSource struct {
	mu            sync.Mutex
	overhead      api.OverheadResponse
	cycles        []api.Cycle // newest first
	details       map[int64]api.CycleDetail
	engines       []api.Engine
	containers    api.ContainersResponse
	busy          bool
	readyErr      error
	err           error  // returned by every data method and TriggerCycle when set
	panicWith     string // every method panics with it when set
	lastQuery     CycleQuery
	triggered     int
	triggeredCold int // of which cold
}

var _ Source = (*fakeSource)(nil)

func (f *fakeSource) enter() {
	if f.panicWith != "" {
		panic(f.panicWith)
	}
}

func (f *fakeSource) Overhead(context.Context) (api.OverheadResponse, error) {
	f.enter()
	return f.overhead, f.err
}

func (f *fakeSource) Cycles(_ context.Context, q CycleQuery) ([]api.Cycle, error) {
	f.enter()
	f.mu.Lock()
	f.lastQuery = q
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []api.Cycle
	for _, c := range f.cycles {
		if (q.Engine == "" || c.Engine == q.Engine) && !c.StartedAt.Before(q.Since) {
			out = append(out, c)
		}
	}
	return out, nil // ignores q.Limit on purpose: the handler must enforce it
}

func (f *fakeSource) Cycle(_ context.Context, id int64) (api.CycleDetail, error) {
	f.enter()
	if f.err != nil {
		return api.CycleDetail{}, f.err
	}
	d, ok := f.details[id]
	if !ok {
		return api.CycleDetail{}, ErrNotFound
	}
	return d, nil
}

func (f *fakeSource) Engines(context.Context) ([]api.Engine, error) {
	f.enter()
	return f.engines, f.err
}

func (f *fakeSource) Containers(context.Context) (api.ContainersResponse, error) {
	f.enter()
	return f.containers, f.err
}

func (f *fakeSource) TriggerCycle(context.Context) (api.TriggerResponse, error) {
	return f.trigger(false)
}

func (f *fakeSource) TriggerColdCycle(context.Context) (api.TriggerResponse, error) {
	return f.trigger(true)
}

// fakeRunningID is the cycle the fake names in its 409s and the first
// of its triggers' cycles.
const fakeRunningID = 43

func (f *fakeSource) trigger(cold bool) (api.TriggerResponse, error) {
	f.enter()
	if f.err != nil {
		return api.TriggerResponse{}, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy {
		return api.TriggerResponse{}, &BusyError{CycleID: fakeRunningID}
	}
	f.triggered++
	if cold {
		f.triggeredCold++
	}
	resp := api.TriggerResponse{}
	for i, e := range f.engines {
		resp.Engines = append(resp.Engines, e.Name)
		resp.CycleIDs = append(resp.CycleIDs, int64(100+10*f.triggered+i))
	}
	if len(resp.CycleIDs) > 0 {
		resp.CycleID = resp.CycleIDs[0]
	}
	return resp, nil
}

func (f *fakeSource) Ready() error {
	f.enter()
	return f.readyErr
}

// newFakeSource returns a source with two engines: "default" (overlay2,
// measured, with failures and missing figures) and "btrfs-lab" (never
// reached: nil lists and maps, no last cycle).
func newFakeSource() *fakeSource {
	samples := fakeSamples()
	results := measure.Summarize(samples, measure.DefaultConfidence)
	lastSuccess := t0.Add(-10 * time.Minute)
	baselineRatio := 1.04

	ok := api.Cycle{
		ID: 42, Engine: "default", Mode: "steady", Profile: "quick", Result: "ok", Trigger: "schedule",
		StartedAt: t0.Add(-20 * time.Minute), FinishedAt: lastSuccess, DurationSeconds: 600.5,
		Rounds: 6, BytesWritten: 3 << 30,
	}
	failed := api.Cycle{
		ID: 41, Engine: "default", Mode: "steady", Profile: "quick", Result: "skipped", Reason: "host_busy",
		Message: "I/O pressure 42% over the last 60 s", Trigger: "schedule",
		StartedAt: t0.Add(-80 * time.Minute), FinishedAt: t0.Add(-80 * time.Minute), DurationSeconds: 0.01,
	}
	runningEnd := t0.Add(2 * time.Minute)
	running := api.Cycle{
		ID: 43, Engine: "btrfs-lab", Mode: "steady", Profile: "seed", Result: "running", Trigger: "api",
		StartedAt: t0.Add(-time.Minute), // FinishedAt zero while running
		Running: &api.CycleProgress{Phase: "measure", Workload: measure.Fsync, RoundsDone: 7, BytesWritten: 320 << 20,
			EstimatedEnd: &runningEnd, UpdatedAt: t0},
	}
	old := api.Cycle{
		ID: 7, Engine: "default", Mode: "steady", Profile: "quick", Result: "failed", Reason: "fio_missing",
		Message: "fio not found", Trigger: "confirm",
		StartedAt: t0.Add(-72 * time.Hour), FinishedAt: t0.Add(-72*time.Hour + time.Second), DurationSeconds: 1,
	}

	nextCycle := t0.Add(6 * time.Hour)
	return &fakeSource{
		overhead: api.OverheadResponse{
			GeneratedAt: t0,
			Confidence:  measure.DefaultConfidence,
			Engines: []api.EngineOverhead{
				{Engine: "default", Driver: "overlay2", BackingFS: "extfs", Mode: "steady", LastCycleID: 42,
					LastSuccess: &lastSuccess, Window: 6, IntervalRounds: 6, NextCycleAt: &nextCycle, Results: results},
				{Engine: "btrfs-lab", Driver: "btrfs", BackingFS: "btrfs", Mode: "steady", IntervalRounds: 6}, // Results nil
			},
		},
		cycles: []api.Cycle{running, ok, failed, old},
		details: map[int64]api.CycleDetail{
			42: {Cycle: ok, Samples: samples, Results: results},
			41: {Cycle: failed}, // nil lists
		},
		engines: []api.Engine{
			{Name: "default", Endpoint: "unix:///var/run/docker.sock", Reachable: true, EngineFacts: measure.EngineFacts{
				Runtime: "docker", EngineVersion: "28.1.1", Driver: "overlay2", DriverClass: "supported", BackingFS: "extfs",
				DataRoot: "/var/lib/docker", ImageStore: "graphdriver", FioVersion: "fio-3.33"}, Warnings: []string{"volume target on another file system"},
				LastCycle: &ok, FsyncRegression: map[string]bool{"container": true, "bind": false, "volume": false},
				Detector: map[string]api.DetectorState{
					"container": {Phase: "regressed", Since: &lastSuccess, Rounds: 40, BaselineRatio: &baselineRatio, CUSUM: 7.5},
					"bind":      {Phase: "watching", Since: &lastSuccess, Rounds: 40, BaselineRatio: &baselineRatio, CUSUM: 0.4},
					"volume":    {Phase: "learning", Rounds: 4},
				}},
			{Name: "btrfs-lab", Endpoint: "unix:///run/containerd/containerd.sock", EngineFacts: measure.EngineFacts{Runtime: "containerd", Driver: "btrfs"}}, // nil Warnings, nil map
		},
		containers: fakeContainers(),
	}
}

// fakeContainers is an advisor pass over "default" with a container that
// writes into its layer and a database with its data there, and an engine
// never passed over ("btrfs-lab": nil lists, null fields).
func fakeContainers() api.ContainersResponse {
	at := t0.Add(-5 * time.Minute)
	grown, unattributed := int64(1<<20), int64(0)
	writer := api.Container{ID: "0123456789ab", Name: "writer", Image: "registry.example.com/app:1.2", StartedAt: t0.Add(-time.Hour), Rank: 1,
		Layer: api.LayerWrites{Bytes: 64 << 20, GrowthBytes: &grown, GrowthSeconds: 300, Source: "upper_dir", Exact: true, Entries: 12,
			TopPaths: []api.PathBytes{{Path: "/data/out", Bytes: 64 << 20}}},
		BlockIO:    &api.BlockWrites{Bytes: 65 << 20, Cgroup: "v1", Devices: []string{"254:0"}, Note: "cgroup v1 ..."},
		Mounts:     []api.MountWrites{{Type: "tmpfs", Destination: "/run", RW: true, Note: "tmpfs: memory, not disk"}},
		WritesLand: []api.Landing{{Where: "layer", Bytes: 64 << 20, Exact: true}}, UnattributedBytes: &unattributed,
		Cost:   &api.LayerCost{Workload: measure.SeqWrite, Bytes: 64 << 20, ExtraSeconds: 0.05, Low: -0.01, High: 0.12},
		Advice: []api.Advice{{Kind: "layer_writes", Path: "/data/out", Message: "mount a volume at /data/out"}}}
	pg := api.Container{ID: "abcdef012345", Name: "pg", Image: "postgres:16", StartedAt: t0.Add(-time.Hour), Rank: 2,
		Layer:  api.LayerWrites{Bytes: 40960, Source: "upper_dir", Exact: false, Note: "a lower bound", TopPaths: []api.PathBytes{}},
		Mounts: []api.MountWrites{}, WritesLand: []api.Landing{},
		Database: &api.Database{Name: "postgres", DataDirs: []string{"/var/lib/postgresql/data"}, InLayer: true},
		Advice:   []api.Advice{{Kind: "database_in_layer", Path: "/var/lib/postgresql/data", Message: "mount a volume there"}}}
	return api.ContainersResponse{GeneratedAt: t0, Confidence: measure.DefaultConfidence, Engines: []api.EngineContainers{
		{Engine: "default", Driver: "overlay2", ObservedAt: &at,
			LayerVsVolume: []api.LayerOverhead{{Workload: measure.SeqWrite, Metric: "bandwidth", Slowdown: 0.02, SlowdownLow: -0.01, SlowdownHigh: 0.05,
				Rounds: 12, Coverage: 0.96, VolumeWriteBytesPerSecond: 700 << 20}},
			Pass:       &api.AdvisorPass{DurationSeconds: 0.2, CPUSeconds: 0.03, Entries: 40, Containers: 2},
			Containers: []api.Container{writer, pg}},
		{Engine: "btrfs-lab", Driver: "btrfs", Error: "cannot reach Docker engine"}, // nil lists, null pass
	}}
}

// fakeSamples are six rounds of the fsync and seqwrite jobs on host,
// container and volume. Volume's fsync fails every round (no pair: NaN
// overheads), container fails one round, and fio reported no p99.9 (NaN).
func fakeSamples() []measure.Sample {
	var out []measure.Sample
	start := t0.Add(-20 * time.Minute)
	for round := 1; round <= 6; round++ {
		order := []measure.Target{measure.TargetContainer, measure.TargetHost, measure.TargetVolume}
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for i, target := range order {
			for _, job := range []measure.Workload{measure.SeqWrite, measure.Fsync} {
				slow := map[measure.Target]float64{measure.TargetHost: 1, measure.TargetContainer: 1.12 + 0.01*float64(round), measure.TargetVolume: 1.02}[target]
				s := measure.Sample{
					Round: round, Order: i + 1, Target: target,
					StartedAt: start.Add(time.Duration(round*10+i) * time.Second), DurationSeconds: 5.25,
					JobResult: fakeResult(job, slow),
				}
				switch {
				case target == measure.TargetVolume && job == measure.Fsync:
					s.JobResult = measure.JobResult{Workload: job, FioVersion: "fio-3.33", Read: nanOp(), Write: nanOp(), Sync: nanOp(),
						Failure: &measure.Failure{Reason: measure.ReasonNoSpace, Message: "fio: No space left on device"}}
				case target == measure.TargetContainer && job == measure.Fsync && round == 3:
					s.JobResult = measure.JobResult{Workload: job, Read: nanOp(), Write: nanOp(), Sync: nanOp(),
						Failure: &measure.Failure{Reason: measure.ReasonTimeout, Message: "job exceeded its 2m0s timeout"}}
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func fakeResult(job measure.Workload, slow float64) measure.JobResult {
	r := measure.JobResult{Workload: job, FioVersion: "fio-3.33", Read: nanOp(), Sync: nanOp()}
	r.Read.IOs, r.Read.IOPS, r.Read.BandwidthBytes, r.Sync.IOPS, r.Sync.BandwidthBytes = 0, 0, 0, 0, 0
	switch job {
	case measure.SeqWrite:
		r.Write = measure.Op{IOs: 256, IOPS: 400 / slow, BandwidthBytes: 400 << 20 / slow, Bytes: 256 << 20,
			LatencyMeanSec: 0.0025 * slow, LatencyP50Sec: 0.002 * slow, LatencyP99Sec: 0.009 * slow, LatencyP999Sec: math.NaN()}
		r.BytesWritten = 256 << 20
	case measure.Fsync:
		r.Read = measure.Op{IOs: 500, IOPS: 250 / slow, BandwidthBytes: 250 * 4096 / slow, Bytes: 500 * 4096,
			LatencyMeanSec: 0.0001, LatencyP50Sec: 0.00008, LatencyP99Sec: 0.0004, LatencyP999Sec: math.NaN()}
		r.Write = measure.Op{IOs: 500, IOPS: 250 / slow, BandwidthBytes: 250 * 4096 / slow, Bytes: 500 * 4096,
			LatencyMeanSec: 0.00002, LatencyP50Sec: 0.00001, LatencyP99Sec: 0.00005 * slow, LatencyP999Sec: math.NaN()}
		r.Sync = measure.Op{IOs: 500, LatencyMeanSec: 0.003 * slow, LatencyP50Sec: 0.0025 * slow, LatencyP99Sec: 0.011 * slow, LatencyP999Sec: math.NaN()}
		r.BytesWritten = 2 * 500 * 4096
	}
	return r
}

// nanOp is an Op fio reported nothing for.
func nanOp() measure.Op {
	n := math.NaN()
	return measure.Op{IOPS: n, BandwidthBytes: n, LatencyMeanSec: n, LatencyP50Sec: n, LatencyP99Sec: n, LatencyP999Sec: n}
}
