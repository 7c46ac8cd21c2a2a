//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// runsPlan sizes the per-driver sections: the command line of each kind
// of run after `layerprobe run` (--config, --output json and the log
// level are added).
type runsPlan struct {
	// oldRounds: the earlier method's default profile with many rounds;
	// oldDefault: the earlier method at its default settings.
	oldRounds, oldDefault []string
	// unbounded: the adaptive method with a precision it cannot reach.
	unbounded []string
	reference []string
	// defaults: the adaptive method at its default settings.
	defaults []string
	// Timeouts of one run.
	runTimeout, unboundedTimeout time.Duration
}

func planRuns(short bool) runsPlan {
	if short {
		// Stand-ins with the same shape: the smoke profile's six rounds
		// instead of minutes of measuring.
		return runsPlan{oldRounds: []string{"--profile", "smoke", "--rounds", "6"}, oldDefault: []string{"--profile", "smoke"},
			unbounded: []string{"--profile", "smoke", "--precision", "0.0001", "--max-bytes", "1GiB", "--max-duration", "1m"},
			reference: []string{"--profile", "smoke", "--rounds", "6", "--max-bytes", "0"},
			defaults:  []string{"--profile", "smoke"}, runTimeout: 15 * time.Minute, unboundedTimeout: 15 * time.Minute}
	}
	return runsPlan{oldRounds: []string{"--profile", "quick", "--rounds", "40"},
		unbounded: []string{"--precision", "0.0001", "--max-bytes", "10GiB", "--max-duration", "30m"},
		// The long profile writes tens of GiB: without --max-bytes 0 the
		// default budget would end it after a few rounds. Its own 8
		// rounds, in several runs (BENCH_REFERENCE_RUNS) rather than one
		// run of many rounds: one run's rounds share its minutes on the
		// disk, and a single run's error was taken for the truth.
		reference:  []string{"--profile", "long", "--max-bytes", "0"},
		runTimeout: 45 * time.Minute, unboundedTimeout: 50 * time.Minute}
}

// pairTargets is the configuration of the runs that measure the writable
// layer and the A/A control only (host always runs).
const pairTargets = "targets: [container, bind]\n"

// runner starts the runs of one driver's sections.
type runner struct {
	p                    *progress
	driver               string
	host, lockFile, work string
	bin, oldBin          string
	plan                 runsPlan
}

func (r runner) lp(binary, name, config string, args []string, timeout time.Duration) lpRun {
	bin := r.bin
	if binary == "old" {
		bin = r.oldBin
	}
	return lpRun{binary: binary, bin: bin, host: r.host, lockFile: r.lockFile,
		workDir: filepath.Join(r.work, r.driver+"-"+name), config: config, args: args, timeout: timeout}
}

// one runs one run with progress lines around it.
func (r runner) one(ctx context.Context, what string, l lpRun) (*runDoc, error) {
	r.p.logf("%s: %s: layerprobe %s", r.driver, what, strings.Join(l.args, " "))
	stop := r.p.ticker(r.driver+" "+what, l.timeout/3, 5*time.Minute)
	d, err := l.run(ctx)
	stop()
	if err != nil {
		return d, fmt.Errorf("%s %s: %w", r.driver, what, err)
	}
	if err := checkRecorded(d); err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.driver, what, err)
	}
	r.p.logf("%s: %s: %s", r.driver, what, describeRun(d))
	return d, nil
}

// describeRun is a progress line's summary of a run.
func describeRun(d *runDoc) string {
	var hw []string
	for _, workload := range workloads {
		if o, ok := estimateOf(d, "container", workload); ok {
			hw = append(hw, fmt.Sprintf("%s %s ±%.1f pp", workload, pct(o.Ratio), o.halfWidthPP()))
		}
	}
	return fmt.Sprintf("%s in %s, %d rounds, stop %s; container %s", gib(d.BytesWritten), dur(d.Seconds), d.Rounds,
		orDash(d.StopReason), strings.Join(hw, ", "))
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// measureOld runs the earlier method: once with many rounds, then
// oldDefaultRuns times at its default settings (all four targets).
func (r runner) measureOld(ctx context.Context, dr *driverResult, oldDefaultRuns int) error {
	d, err := r.one(ctx, "earlier method, many rounds", r.lp("old", "old-rounds", pairTargets, r.plan.oldRounds, r.plan.runTimeout))
	if err != nil {
		return err
	}
	dr.OldRounds = d
	for i := 1; i <= oldDefaultRuns; i++ {
		d, err := r.one(ctx, fmt.Sprintf("earlier method at its defaults %d/%d", i, oldDefaultRuns),
			r.lp("old", "old-default", "", r.plan.oldDefault, r.plan.runTimeout))
		if err != nil {
			return err
		}
		dr.OldDefaults = append(dr.OldDefaults, *d)
	}
	return nil
}

// measureUnbounded runs the adaptive method until its large budget ends it.
func (r runner) measureUnbounded(ctx context.Context, dr *driverResult) error {
	d, err := r.one(ctx, "adaptive method, unreachable precision", r.lp("new", "unbounded", pairTargets, r.plan.unbounded, r.plan.unboundedTimeout))
	if err != nil {
		return err
	}
	dr.Unbounded = d
	return nil
}

// measureReference runs the long profile n times: the independent
// reference, its runs combined by referenceOf. save is called after every
// run; a failed run is recorded and the next one starts.
func (r runner) measureReference(ctx context.Context, dr *driverResult, n int, save func()) error {
	var errs []string
	for i := len(dr.References) + 1; i <= n && ctx.Err() == nil; i++ {
		if err := r.reference(ctx, dr, i, n, save); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d reference runs failed: %s", len(errs), n, strings.Join(errs, "; "))
	}
	return nil
}

// reference runs the i-th of n reference runs into dr.
func (r runner) reference(ctx context.Context, dr *driverResult, i, n int, save func()) error {
	d, err := r.one(ctx, fmt.Sprintf("reference (long profile) %d/%d", i, n), r.lp("new", "reference", pairTargets, r.plan.reference, r.plan.unboundedTimeout))
	if err != nil {
		return err
	}
	dr.References = append(dr.References, *d)
	save()
	return nil
}

// interleave places refs reference runs among n default runs: the j-th
// starts before default run out[j] (from 1), in the middle of an equal
// share of the default runs, so that both sample the same hours of the
// disk. Measured one after the other, hours apart, the overlay2 default
// runs read random writes at +2.1% and the reference at +6.8% [+4.6, +9.0]:
// a shared disk's drift between the two sections passes for a bias.
func interleave(n, refs int) []int {
	out := make([]int, refs)
	for j := range out {
		out[j] = n*(2*j+1)/(2*refs) + 1
	}
	return out
}

// dueReferences are the reference runs (from 0) to make before default run
// i: those placed at or before it (interleave's at) that neither a
// resumed section kept (the first kept) nor this sitting tried, which it
// marks. A fresh section runs reference j just before default run at[j];
// a resumed one first catches up with the references it missed.
func dueReferences(at []int, i, kept int, tried map[int]bool) []int {
	var out []int
	for j, before := range at {
		if before <= i && j >= kept && !tried[j] {
			tried[j] = true
			out = append(out, j)
		}
	}
	return out
}

// measureDefaults runs the adaptive method at its default settings n
// times, with refs reference runs spread among them (interleave; 0 for
// none); save is called after every run, so that hours of runs survive a
// later failure. A failed run is recorded and the next one starts; three
// default runs failed in a row end the section, reference runs not yet
// started included. Runs already in dr (BENCH_RESUME) count: the section
// goes on from the next default run and the next reference run, so that a
// long section can be measured over several sittings. The test's deadline
// stops it between runs, with an error that says how far it got.
func (r runner) measureDefaults(ctx context.Context, dr *driverResult, n, refs int, save func()) error {
	var errs, refErrs []string
	var stopped error
	failedInRow := 0
	at := interleave(n, refs)
	kept, tried := len(dr.References), map[int]bool{}
	for i := len(dr.Defaults) + 1; i <= n; i++ {
		for _, j := range dueReferences(at, i, kept, tried) {
			if ctx.Err() != nil {
				break
			}
			if err := r.reference(ctx, dr, j+1, refs, save); err != nil {
				refErrs = append(refErrs, err.Error())
			}
		}
		var d *runDoc
		err := ctx.Err()
		if err == nil {
			d, err = r.one(ctx, fmt.Sprintf("default run %d/%d", i, n), r.lp("new", "default", "", r.plan.defaults, r.plan.runTimeout))
		}
		if ctx.Err() != nil {
			// The reference's runs only where they are interleaved with
			// these; otherwise the section keeps the reference it has.
			refRuns := ""
			if refs > 0 {
				refRuns = fmt.Sprintf(" and %d of %d reference", len(dr.References), refs)
			}
			stopped = fmt.Errorf("stopped by the deadline after %d of %d default%s runs (BENCH_RESUME=1 goes on from there)", len(dr.Defaults), n, refRuns)
			break
		}
		if err != nil {
			errs = append(errs, err.Error())
			if failedInRow++; failedInRow == 3 {
				break
			}
			continue
		}
		failedInRow = 0
		dr.Defaults = append(dr.Defaults, *d)
		if i%5 == 0 || i == n {
			r.p.logf("%s: %d default runs so far: container half-width (median) %s", r.driver, len(dr.Defaults), medianHalfWidths(dr.Defaults))
		}
		save()
	}
	err := stopped
	if len(errs) > 0 {
		err = errors.Join(err, fmt.Errorf("%d of %d default runs failed: %s", len(errs), n, strings.Join(errs, "; ")))
	}
	if len(refErrs) > 0 {
		err = errors.Join(err, fmt.Errorf("%d of %d reference runs failed: %s", len(refErrs), refs, strings.Join(refErrs, "; ")))
	}
	return err
}

// medianHalfWidths is a progress line's median container half-width per
// workload over runs.
func medianHalfWidths(runs []runDoc) string {
	var parts []string
	for _, workload := range workloads {
		var hw []float64
		for i := range runs {
			if o, ok := estimateOf(&runs[i], "container", workload); ok {
				hw = append(hw, o.halfWidthPP())
			}
		}
		if len(hw) > 0 {
			parts = append(parts, fmt.Sprintf("%s ±%.1f pp", workload, median(hw)))
		}
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}
