//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testdaemon"
)

// btrfsLoopMiB sizes the btrfs loop file: the seed profile lays out 8 GiB
// files, and the free-space guard keeps 5% (at least 1 GiB) free. Sparse:
// only what is written takes space on the root file system.
const btrfsLoopMiB = 24 << 10

// TestBench measures everything and writes the report. See the Makefile's
// bench targets and package doc for the environment it reads.
func TestBench(t *testing.T) {
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	testdaemon.Require(t)
	if s.outDir == "" {
		if s.short {
			if s.outDir, err = os.MkdirTemp("", "layerprobe-bench-"); err != nil {
				t.Fatal(err)
			}
		} else {
			s.outDir = "../docs"
		}
	}
	if s.outDir, err = filepath.Abs(s.outDir); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-2*time.Minute))
		defer cancel()
	}
	// The work directory holds configurations, agent state and logs; it is
	// kept when something failed, for the logs.
	work, err := os.MkdirTemp("", "lpbench-work-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("work directory kept for its logs: %s", work)
			return
		}
		os.RemoveAll(work)
	})
	lockFile := filepath.Join(work, "layerprobe.lock")
	p := &progress{start: time.Now()}
	res := &results{Version: resultsVersion, Short: s.short, StartedAt: time.Now().UTC(),
		Machine: describeMachine(s.bin), SectionSeconds: map[string]float64{}}
	p.logf("layerprobe benchmark (short=%v) -> %s; %s", s.short, s.reportPath(), res.Machine.Layerprobe)

	section := func(name string, f func(t *testing.T) error) {
		if !s.runs(name) && !s.runs(sectionGroup(name)) {
			return
		}
		start := time.Now()
		t.Run(name, func(t *testing.T) {
			if err := f(t); err != nil {
				res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
				t.Error(err)
			}
		})
		res.SectionSeconds[name] = time.Since(start).Seconds()
		p.logf("section %s: %s", name, time.Since(start).Round(time.Second))
	}

	pplan := planPrecision(s.short)
	for _, driver := range []string{"overlay2", "btrfs"} {
		section("precision-"+driver, func(t *testing.T) error {
			opts := testdaemon.Options{Driver: driver}
			if driver == "btrfs" {
				opts.SizeMiB = btrfsLoopMiB
				if s.short {
					opts.SizeMiB = 4096
				}
			}
			d := testdaemon.Start(t, opts)
			pd, err := measurePrecision(ctx, p, s.bin, driver, d.Host, lockFile, work, pplan)
			if pd != nil && (pd.Quick != nil || pd.Seed != nil) {
				res.Precision = append(res.Precision, *pd)
			}
			return err
		})
	}
	section("detection", func(t *testing.T) error {
		d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
		dr, err := measureDetection(ctx, p, s.bin, d.Host, lockFile, work, planDetection(s.short))
		res.Detection = dr
		return err
	})
	section("footprint", func(t *testing.T) error {
		d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
		dir := filepath.Join(work, "footprint")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		fr, err := measureFootprint(ctx, t, s.bin, d.Host, dir, s.short)
		if fr != nil {
			b, merr := json.Marshal(fr)
			if merr != nil {
				return fmt.Errorf("encode footprint: %w", merr)
			}
			res.Footprint = b
		}
		return err
	})

	res.FinishedAt = time.Now().UTC()
	if err := writeResults(s.resultsPath(), res); err != nil {
		t.Fatal(err)
	}
	if err := writeReport(s, res); err != nil {
		t.Fatal(err)
	}
	p.logf("wrote %s and %s (%s in all)", s.reportPath(), s.resultsPath(), res.FinishedAt.Sub(res.StartedAt).Round(time.Second))
	printSummary(res)
}

// sectionGroup lets BENCH_ONLY=precision select both drivers.
func sectionGroup(name string) string {
	if len(name) > 10 && name[:10] == "precision-" {
		return "precision"
	}
	return name
}

// TestBenchReport regenerates the report and its plots from the raw
// results (BENCH_RESULTS, default BENCH_OUT/bench/results.json) without
// measuring anything.
func TestBenchReport(t *testing.T) {
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	if s.outDir == "" {
		s.outDir = "../docs"
	}
	if s.outDir, err = filepath.Abs(s.outDir); err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("BENCH_RESULTS")
	if path == "" {
		path = s.resultsPath()
	}
	res, err := readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeReport(s, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", s.reportPath())
}
