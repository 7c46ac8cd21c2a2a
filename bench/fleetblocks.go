//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/testsupport/fleetgen"
)

// The fleet's history written straight into TSDB blocks, one per day, by
// Prometheus' own TSDB and query engine (Prometheus 2.53's module: the
// version vegeta's module graph already requires; Debian's 2.42 reads its
// blocks, which checkHistory confirms on every run).
// promtool's OpenMetrics backfill parses text at about 150k samples/s here
// and its rule backfill asks a running server over HTTP, one rule and
// range at a time: a day of N = 1000 took 12 and 11 minutes, 30 days would
// take most of a working day. Written here, the raw history goes in at
// millions of samples a second, and the fleet's recording rules are
// evaluated as Prometheus evaluates them (a range query per rule and day
// at the group's interval: what promtool's rule backfill does), layer by
// layer, their results written beside the raw day. Each day's blocks are
// then merged into one, so that the server starts on 30 non-overlapping
// day blocks and runs no vertical compaction while it is measured.

// fleetBlockStats is what writing the blocks took.
type fleetBlockStats struct {
	Samples      int64
	RawSeconds   float64
	RulesSeconds float64
	MergeSeconds float64
}

// fleetBlockDuration is the blocks' length: the server is started with it
// as --storage.tsdb.max-block-duration, so that it does not compact them
// into longer ones while it is measured.
const fleetBlockDuration = 24 * time.Hour

// fleetRule is a recording rule to evaluate over the history.
type fleetRule struct {
	Record string            `yaml:"record"`
	Expr   string            `yaml:"expr"`
	Labels map[string]string `yaml:"labels"`
	// every is its group's interval (0: the history's step): the hourly
	// records are read over ranges, 720 samples for 30 days, and a bed
	// that held them every 5 minutes would time the panels over 12 times
	// as many.
	every time.Duration
}

// fleetRuleLayers are the recording rules of the groups named in rules,
// in layers (fleetgen.RuleLayers), each with its group's interval.
func fleetRuleLayers(rules []byte, groups ...string) ([][]fleetRule, error) {
	layerFiles, err := fleetgen.RuleLayers(rules, groups...)
	if err != nil {
		return nil, err
	}
	var layers [][]fleetRule
	for _, lf := range layerFiles {
		var f struct {
			Groups []struct {
				Name     string      `yaml:"name"`
				Interval string      `yaml:"interval"`
				Rules    []fleetRule `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(lf, &f); err != nil {
			return nil, err
		}
		var rs []fleetRule
		for _, g := range f.Groups {
			var every time.Duration
			if g.Interval != "" {
				// The mixin's intervals (5m, 1h) are Go durations too.
				every, err = time.ParseDuration(g.Interval)
				if err != nil {
					return nil, fmt.Errorf("group %s: interval: %w", g.Name, err)
				}
			}
			for _, r := range g.Rules {
				r.every = every
				rs = append(rs, r)
			}
		}
		layers = append(layers, rs)
	}
	return layers, nil
}

// writeFleetBlocks writes the history of hosts from cfg.Start to end (cfg's
// step) into data as day blocks with the recording rules of the groups
// named in rules (their layers: fleetgen.RuleLayers) evaluated over them
// at their groups' intervals (every step where a group has none).
func writeFleetBlocks(ctx context.Context, p *progress, data string, rec *fleetgen.Recording, hosts []fleetgen.Host,
	cfg fleetgen.Config, end time.Time, rules []byte, groups ...string) (fleetBlockStats, error) {
	var st fleetBlockStats
	layers, err := fleetRuleLayers(rules, groups...)
	if err != nil {
		return st, err
	}
	stage := data + ".stage"
	// An empty write-ahead log: a read-only DB reads one.
	if err := os.MkdirAll(filepath.Join(stage, "wal"), 0o755); err != nil {
		return st, err
	}
	defer os.RemoveAll(stage)
	var days []time.Time
	for d := cfg.Start; d.Before(end); d = d.Add(fleetBlockDuration) {
		days = append(days, d)
	}
	dayEnd := func(d time.Time) time.Time {
		if e := d.Add(fleetBlockDuration); e.Before(end) {
			return e
		}
		return end
	}

	// The raw history, two days at a time (this machine's two cores).
	t0 := time.Now()
	var mu sync.Mutex
	var firstErr error
	work := make(chan time.Time)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				c := cfg
				c.Start, c.End = d, dayEnd(d)
				n, err := writeBlock(ctx, stage, func(app func(labels.Labels, []int64, []float64) error) error {
					return fleetgen.EachSeries(rec, hosts, c, func(name string, l map[string]string, ts []int64, vs []float64) error {
						lb := labels.NewBuilder(labels.FromMap(l))
						lb.Set(labels.MetricName, name)
						return app(lb.Labels(), ts, vs)
					})
				})
				mu.Lock()
				st.Samples += n
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("day from %s: %w", d.UTC().Format(time.RFC3339), err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, d := range days {
		work <- d
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return st, firstErr
	}
	st.RawSeconds = time.Since(t0).Seconds()
	p.logf("fleet %dx%dd: raw history written (%d samples; %s)", len(hosts), len(days), st.Samples, time.Since(t0).Round(time.Second))

	// The recording rules, day by day (a rule may look a day back), each
	// layer reading the ones before it.
	t1 := time.Now()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1 << 31, Timeout: time.Hour, LookbackDelta: 5 * time.Minute})
	for _, d := range days {
		for li, layer := range layers {
			if err := evalLayer(ctx, engine, stage, layer, d, dayEnd(d), cfg.Step); err != nil {
				return st, fmt.Errorf("rules layer %d, day from %s: %w", li, d.UTC().Format(time.RFC3339), err)
			}
		}
	}
	st.RulesSeconds = time.Since(t1).Seconds()
	p.logf("fleet %dx%dd: %d recording rules in %d layers evaluated (%s)", len(hosts), len(days), countRules(layers), len(layers), time.Since(t1).Round(time.Second))

	// One block per day.
	t2 := time.Now()
	if err := mergeDays(ctx, stage, data, cfg.Start); err != nil {
		return st, err
	}
	st.MergeSeconds = time.Since(t2).Seconds()
	p.logf("fleet %dx%dd: day blocks merged (%s)", len(hosts), len(days), time.Since(t2).Round(time.Second))
	return st, nil
}

func countRules(layers [][]fleetRule) int {
	n := 0
	for _, l := range layers {
		n += len(l)
	}
	return n
}

// writeBlock writes the series fill appends as one block in dir and
// returns the number of samples. No block is written when fill appends
// none.
func writeBlock(ctx context.Context, dir string, fill func(app func(labels.Labels, []int64, []float64) error) error) (int64, error) {
	// Twice the block: the writer's head refuses a sample more than half
	// its range older than the newest, and the series go in one after
	// another, each over the whole day (promtool's backfill does the same).
	w, err := tsdb.NewBlockWriter(log.NewNopLogger(), dir, 2*fleetBlockDuration.Milliseconds())
	if err != nil {
		return 0, err
	}
	defer w.Close()
	a := w.Appender(ctx)
	var n, pending int64
	err = fill(func(l labels.Labels, ts []int64, vs []float64) error {
		var ref storage.SeriesRef
		for i, t := range ts {
			var err error
			if ref, err = a.Append(ref, l, t, vs[i]); err != nil {
				return fmt.Errorf("%s at %d: %w", l, t, err)
			}
		}
		n += int64(len(ts))
		// An appender buffers its samples until Commit: commit often
		// enough that a day of a large fleet is not held twice.
		if pending += int64(len(ts)); pending > 1<<20 {
			pending = 0
			if err := a.Commit(); err != nil {
				return err
			}
			a = w.Appender(ctx)
		}
		return nil
	})
	if err != nil {
		a.Rollback()
		return n, err
	}
	if err := a.Commit(); err != nil {
		return n, err
	}
	if n == 0 {
		return 0, nil
	}
	_, err = w.Flush(ctx)
	return n, err
}

// evalLayer evaluates rules over [from, to) every step, as range queries
// over the blocks in dir, and writes their results there as one block.
func evalLayer(ctx context.Context, engine *promql.Engine, dir string, rules []fleetRule, from, to time.Time, step time.Duration) error {
	db, err := tsdb.OpenDBReadOnly(dir, os.TempDir(), log.NewNopLogger())
	if err != nil {
		return err
	}
	defer db.Close()
	q := storage.QueryableFunc(db.Querier)
	_, err = writeBlock(ctx, dir, func(app func(labels.Labels, []int64, []float64) error) error {
		for _, r := range rules {
			every := step
			if r.every > 0 {
				every = r.every
			}
			qry, err := engine.NewRangeQuery(ctx, q, nil, r.Expr, from, to.Add(-time.Millisecond), every)
			if err != nil {
				return fmt.Errorf("%s: %w", r.Record, err)
			}
			res := qry.Exec(ctx)
			if res.Err != nil {
				qry.Close()
				return fmt.Errorf("%s: %w", r.Record, res.Err)
			}
			m, err := res.Matrix()
			if err != nil {
				qry.Close()
				return fmt.Errorf("%s: %w", r.Record, err)
			}
			var ts []int64
			var vs []float64
			for _, s := range m {
				lb := labels.NewBuilder(s.Metric)
				lb.Set(labels.MetricName, r.Record)
				for k, v := range r.Labels {
					lb.Set(k, v)
				}
				ts, vs = ts[:0], vs[:0]
				for _, pt := range s.Floats {
					ts, vs = append(ts, pt.T), append(vs, pt.F)
				}
				if err := app(lb.Labels(), ts, vs); err != nil {
					qry.Close()
					return err
				}
			}
			qry.Close()
		}
		return nil
	})
	return err
}

// mergeDays merges the blocks of each day from start in src (the raw
// history and each rule layer's) into one block in dst.
func mergeDays(ctx context.Context, src, dst string, start time.Time) error {
	blocks, err := tsdb.OpenDBReadOnly(src, os.TempDir(), log.NewNopLogger())
	if err != nil {
		return err
	}
	bs, err := blocks.Blocks()
	if err != nil {
		blocks.Close()
		return err
	}
	byDay := map[int64][]string{}
	for _, b := range bs {
		m := b.Meta()
		day := (m.MinTime - start.UnixMilli()) / fleetBlockDuration.Milliseconds()
		byDay[day] = append(byDay[day], filepath.Join(src, m.ULID.String()))
	}
	blocks.Close()
	comp, err := tsdb.NewLeveledCompactor(ctx, nil, log.NewNopLogger(), []int64{fleetBlockDuration.Milliseconds()}, chunkenc.NewPool(), nil)
	if err != nil {
		return err
	}
	days := make([]int64, 0, len(byDay))
	for d := range byDay {
		days = append(days, d)
	}
	slices.Sort(days)
	for _, d := range days {
		if _, err := comp.Compact(dst, byDay[d], nil); err != nil {
			return fmt.Errorf("merge day %d: %w", d+1, err)
		}
		for _, dir := range byDay[d] {
			os.RemoveAll(dir)
		}
	}
	return nil
}
