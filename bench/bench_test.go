//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

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
	// The work directory holds configurations, agent state, logs and the
	// earlier method's binary; it is kept when something failed, for the
	// logs.
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
		Machine: describeMachine(s.bin), SectionSeconds: map[string]float64{}, Sizes: s.sizes()}
	var rr *rerun
	if s.only != nil {
		// Sections run again replace theirs in the existing results, so
		// that the report still comes from one results file.
		prev, err := readResults(s.resultsPath())
		switch {
		case err == nil:
			res = prev
			res.Reruns = append(res.Reruns, rerun{StartedAt: time.Now().UTC(), Sizes: s.sizes(), Why: os.Getenv("BENCH_RERUN_WHY"), Resumed: s.resume})
			rr = &res.Reruns[len(res.Reruns)-1]
		case !errors.Is(err, fs.ErrNotExist):
			t.Fatalf("BENCH_ONLY replaces sections in the existing results, which cannot be read: %v", err)
		case s.resume:
			t.Fatalf("BENCH_RESUME goes on with the runs in %s, which does not exist", s.resultsPath())
		}
	}
	p.logf("layerprobe benchmark (short=%v) -> %s; %s", s.short, s.reportPath(), res.Machine.Layerprobe)
	save := func() {
		if err := writeResults(s.resultsPath(), res); err != nil {
			t.Errorf("checkpoint: %v", err)
		}
	}

	section := func(name string, f func(t *testing.T) error) {
		// name joins with "+" the sections run together as one.
		parts := strings.Split(name, "+")
		if !slices.ContainsFunc(parts, s.selects) {
			return
		}
		// A resumed section adds its time to the sittings before it.
		earlier := 0.0
		if s.resume {
			earlier = res.SectionSeconds[name]
		}
		for _, part := range parts {
			if rr != nil {
				rr.Sections = append(rr.Sections, part)
			}
			res.forget(part)
		}
		start := time.Now()
		t.Run(name, func(t *testing.T) {
			if err := f(t); err != nil {
				res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", name, err))
				t.Error(err)
			}
		})
		res.SectionSeconds[name] = earlier + time.Since(start).Seconds()
		p.logf("section %s: %s", name, time.Since(start).Round(time.Second))
		save()
	}

	// The earlier method's binary, built once when a section needs it.
	var oldOnce sync.Once
	var oldBin string
	var oldErr error
	old := func() (string, error) {
		oldOnce.Do(func() {
			path := filepath.Join(work, "layerprobe-old")
			p.logf("building the earlier method's binary from %s", s.oldRev)
			commit, err := buildOld(ctx, s.oldRev, path)
			if err != nil {
				oldErr = err
				return
			}
			oldBin, res.OldRev, res.OldVersion = path, commit, cmdLine(path, "version")
			p.logf("built %s: %s", shortRev(commit), res.OldVersion)
		})
		return oldBin, oldErr
	}

	plan := planRuns(s.short)
	for _, driver := range drivers {
		start := func(t *testing.T) runner {
			opts := testdaemon.Options{Driver: driver}
			switch driver {
			case "btrfs":
				opts.SizeMiB = btrfsLoopMiB
				if s.short {
					opts.SizeMiB = 4096
				}
			case "overlay2-ram":
				opts = testdaemon.Options{Driver: "overlay2", Backing: testdaemon.BackingRAM, SizeMiB: ramLoopMiB}
			}
			d := testdaemon.Start(t, opts)
			return runner{p: p, driver: driver, host: d.Host, lockFile: lockFile, work: work, bin: s.bin, plan: plan}
		}
		section("old-"+driver, func(t *testing.T) error {
			bin, err := old()
			if err != nil {
				return err
			}
			r := start(t)
			r.oldBin = bin
			dr := res.driver(driver)
			dr.OldRounds, dr.OldDefaults = nil, nil
			return r.measureOld(ctx, dr, s.oldDefaultRuns)
		})
		section("unbounded-"+driver, func(t *testing.T) error {
			dr := res.driver(driver)
			dr.Unbounded = nil
			return start(t).measureUnbounded(ctx, dr)
		})
		refName, defName := "reference-"+driver, "defaults-"+driver
		if s.selects(refName) && s.selects(defName) {
			// One section: the reference's runs among the default runs
			// (interleave), so that drift of the disk between two
			// sections does not pass for a bias.
			section(refName+"+"+defName, func(t *testing.T) error {
				dr := res.driver(driver)
				if !s.resume {
					dr.References, dr.Defaults = nil, nil
				}
				p.logf("%s: %d default and %d reference runs kept", driver, len(dr.Defaults), len(dr.References))
				return start(t).measureDefaults(ctx, dr, s.defaultRuns[driver], s.referenceRuns, save)
			})
			continue
		}
		section(refName, func(t *testing.T) error {
			dr := res.driver(driver)
			if !s.resume {
				dr.References = nil
			}
			return start(t).measureReference(ctx, dr, s.referenceRuns, save)
		})
		section(defName, func(t *testing.T) error {
			dr := res.driver(driver)
			if !s.resume {
				dr.Defaults = nil
			}
			return start(t).measureDefaults(ctx, dr, s.defaultRuns[driver], 0, save)
		})
	}
	section("detection", func(t *testing.T) error {
		d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
		dr, err := measureDetection(ctx, p, s.bin, d.Host, lockFile, work, planDetection(s.short, s.unperturbedCycles))
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
	section("engines", func(t *testing.T) error {
		runs, err := measureEngines(ctx, t, p, s.bin, work, lockFile, s.short)
		res.Engines = runs
		return err
	})
	section("install", func(t *testing.T) error {
		runs, err := measureInstall(ctx, t, p, s.bin, work, lockFile, s.short)
		res.Install = runs
		return err
	})
	section("cgroupv2", func(t *testing.T) error {
		// Short: the pod alone, whose join is the hardest.
		var skip []string
		if s.short {
			skip = []string{"systemd", "deb", "compose"}
		}
		// BENCH_CGROUPV2_RERUN: only the deployments it names, merged
		// into the recorded pass.
		rerun := os.Getenv("BENCH_CGROUPV2_RERUN")
		if rerun != "" {
			var err error
			if skip, err = rerunSkip(rerun); err != nil {
				return err
			}
		}
		pass, err := measureCgroupV2(ctx, t, p, "fix", "", skip...)
		if rerun != "" {
			pass = mergeCgroupV2(res.cgroupV2Pass("fix"), pass)
		}
		res.setCgroupV2(pass)
		return err
	})
	if !s.short {
		section("cgroupv2-before", func(t *testing.T) error {
			// The .deb of that revision is its unit: left out. With
			// BENCH_CGROUPV2_RERUN, only the deployments it names,
			// merged into the recorded pass, as above.
			skip := []string{"deb"}
			rerun := os.Getenv("BENCH_CGROUPV2_RERUN")
			if rerun != "" {
				more, err := rerunSkip(rerun)
				if err != nil {
					return err
				}
				skip = append(skip, more...)
			}
			pass, err := measureCgroupV2(ctx, t, p, "before", s.v2BeforeRev, skip...)
			if rerun != "" {
				pass = mergeCgroupV2(res.cgroupV2Pass("before"), pass)
			}
			res.setCgroupV2(pass)
			return err
		})
	}
	section("fleet", func(t *testing.T) error {
		fr, err := runFleet(ctx, t, s, p, func(fr *fleetResults) { res.Fleet = fr; save() })
		res.Fleet = fr
		return err
	})

	if rr != nil {
		rr.FinishedAt = time.Now().UTC()
	} else {
		res.FinishedAt = time.Now().UTC()
	}
	if err := writeResults(s.resultsPath(), res); err != nil {
		t.Fatal(err)
	}
	if err := writeReport(s, res); err != nil {
		t.Fatal(err)
	}
	p.logf("wrote %s and %s (%s)", s.reportPath(), s.resultsPath(), time.Since(p.start).Round(time.Second))
	printSummary(res)
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
