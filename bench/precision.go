//go:build bench

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// precisionPlan sizes section 1.
type precisionPlan struct {
	quickProfile  string
	defaultRounds int // the default profile's rounds; the run does twice as many
	seedProfile   string
	seedRounds    int
	seedExpect    time.Duration // for the progress lines
}

func planPrecision(short bool) precisionPlan {
	if short {
		// Stand-ins with the same shape: seconds instead of half an hour.
		return precisionPlan{quickProfile: "smoke", defaultRounds: 3, seedProfile: "quick", seedRounds: 3, seedExpect: time.Minute}
	}
	return precisionPlan{quickProfile: "quick", defaultRounds: 10, seedProfile: "seed", seedRounds: 3, seedExpect: 21 * time.Minute}
}

// precisionTargets: the seed profile's three runs take about 3.5 minutes
// per target and round on this machine, so both profiles measure host and
// the writable layer only, the comparison the seed article makes.
var precisionTargets = []string{"container"}

// measurePrecision runs the default profile and the seed profile on one
// private daemon.
func measurePrecision(ctx context.Context, p *progress, bin, driver, host, lockFile, workDir string, plan precisionPlan) (*precisionDriver, error) {
	res := &precisionDriver{Driver: driver, Targets: precisionTargets, QuickProfile: plan.quickProfile,
		DefaultRounds: plan.defaultRounds, SeedProfile: plan.seedProfile}
	cfg := "targets: [container]\n"
	base := lpRun{bin: bin, host: host, lockFile: lockFile, workDir: filepath.Join(workDir, "precision-"+driver), config: cfg}

	q := base
	q.profile, q.rounds, q.timeout = plan.quickProfile, 2*plan.defaultRounds, 30*time.Minute
	p.logf("%s: %s profile, %d rounds (host, container)", driver, q.profile, q.rounds)
	run, err := q.run(ctx)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", driver, q.profile, err)
	}
	res.Quick = run
	p.logf("%s: %s done in %.0f s, %.2f GiB", driver, q.profile, run.DurationSeconds, float64(run.BytesWritten)/(1<<30))

	s := base
	s.profile, s.rounds, s.timeout = plan.seedProfile, plan.seedRounds, 3*plan.seedExpect+10*time.Minute
	p.logf("%s: %s profile, %d rounds (host, container); expect about %s", driver, s.profile, s.rounds, plan.seedExpect)
	stop := p.ticker(driver+" "+s.profile, plan.seedExpect, 2*time.Minute)
	run, err = s.run(ctx)
	stop()
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", driver, s.profile, err)
	}
	res.Seed = run
	p.logf("%s: %s done in %.0f s, %.2f GiB", driver, s.profile, run.DurationSeconds, float64(run.BytesWritten)/(1<<30))
	return res, nil
}
