package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/layerprobe/layerprobe/internal/agent"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/engine/connect"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probe"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/version"
)

type runOptions struct {
	Profile   string
	Rounds    int
	Precision float64
	MaxBytes  string
	MaxTime   time.Duration
	SideEvery int
	Output    string
	Mode      string
	Engines   []string
	Workloads []string
	Quiet     bool
	// StartupImages are the start-up images' sizes (cold mode), as
	// given and parsed.
	StartupImages []string
	startupSizes  []int64
}

func newRunCommand(g *globalOptions) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Measure once: every target and workload, several rounds, and print the overhead table",
		Long: `Run one measurement on each configured engine (default: DOCKER_HOST or the default
socket) and print, per target and workload, the speed in percent of the host's with a
95% confidence interval, and the raw IOPS, bandwidth and latencies.

Each round runs one workload on every target (host, container, bind, volume) once, in
a random order that the workload's next round reverses; the overhead is the
Hodges-Lehmann estimate of the per-round ratios to host. With the default profile the
rounds go on until every interval is within --precision or --max-bytes is written.

Progress goes to stderr: a live bar on a terminal, one line per round otherwise
(stdout keeps the table or the JSON alone); --quiet turns it off.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("profile") {
				cfg.Profile = o.Profile
			}
			if cmd.Flags().Changed("rounds") {
				cfg.Budget.Rounds = o.Rounds
			}
			if cmd.Flags().Changed("precision") {
				cfg.Budget.Precision = o.Precision
			}
			if cmd.Flags().Changed("max-bytes") {
				n, err := config.ParseByteSize(o.MaxBytes)
				if err != nil {
					return usageError{fmt.Errorf("--max-bytes %q: %w", o.MaxBytes, err)}
				}
				cfg.Budget.MaxBytes = n
			}
			if cmd.Flags().Changed("max-duration") {
				cfg.Budget.MaxDuration = o.MaxTime
			}
			if cmd.Flags().Changed("side-every") {
				cfg.Budget.SideEvery = o.SideEvery
			}
			if cmd.Flags().Changed("workloads") {
				cfg.Workloads = nil
				for _, w := range o.Workloads {
					cfg.Workloads = append(cfg.Workloads, measure.Workload(w))
				}
			}
			switch measure.Mode(o.Mode) {
			case measure.ModeSteady, measure.ModeCold, measure.ModeBoth:
			default:
				return usageError{fmt.Errorf("--mode %q: want steady, cold or both", o.Mode)}
			}
			for _, v := range o.StartupImages {
				if v == "" {
					continue
				}
				n, err := config.ParseByteSize(v)
				if err != nil || n < 1<<20 || n > 2<<30 {
					return usageError{fmt.Errorf("--startup-images %q: want sizes from 1MiB to 2GiB, e.g. 10MiB,100MiB", v)}
				}
				o.startupSizes = append(o.startupSizes, int64(n))
			}
			if o.Output != "table" && o.Output != "json" {
				return usageError{fmt.Errorf("--output %q: want table or json", o.Output)}
			}
			if err := cfg.Validate(); err != nil {
				return usageError{fmt.Errorf("flags: %w", err)}
			}
			if err := cfg.RoundFits(cfg.Budget.MaxBytes); err != nil {
				return usageError{fmt.Errorf("--max-bytes (budget.max_bytes) %w", err)}
			}
			return runRun(cmd.Context(), cfg, o, g.logger, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	// The defaults shown are the configuration's (config.Default()).
	def := config.Default()
	f := cmd.Flags()
	f.StringVar(&o.Profile, "profile", def.Profile, "built-in fio profile: "+strings.Join(fio.ProfileNames(), ", "))
	f.IntVar(&o.Rounds, "rounds", def.Budget.Rounds, "fixed rounds of every job (0 = the profile's default: adaptive for quick; at least 6 for a 95% interval)")
	f.Float64Var(&o.Precision, "precision", def.Budget.Precision, "stop an adaptive run when every 95% interval's half-width is at most this (0.03 = 3 percentage points)")
	f.StringVar(&o.MaxBytes, "max-bytes", def.Budget.MaxBytes.String(), "most bytes the run writes per engine (0 = no cap)")
	f.DurationVar(&o.MaxTime, "max-duration", def.Budget.MaxDuration, "longest an adaptive run adds rounds per engine (0 = no cap)")
	f.IntVar(&o.SideEvery, "side-every", def.Budget.SideEvery, "after the minimum rounds, run bind and volume in one of every N rounds and ask the precision of the container alone (1 = every target every round)")
	f.StringVarP(&o.Output, "output", "o", "table", "output format: table or json")
	f.StringVar(&o.Mode, "mode", string(measure.ModeSteady), "steady (long-lived probe container), cold (a fresh container per round: first writes and copy-up) or both")
	f.StringSliceVar(&o.Workloads, "workloads", nil, "run only these workloads of the profile, e.g. fsync,smallfiles (default: all; overrides workloads)")
	f.StringSliceVar(&o.Engines, "engine", nil, "measure only these configured engines (default: all)")
	f.StringSliceVar(&o.StartupImages, "startup-images", []string{"10MiB", "100MiB"},
		"cold mode: files in the images whose container start-up is timed (at least 1MiB each, at most 2GiB; empty: no start-up measurement)")
	f.BoolVarP(&o.Quiet, "quiet", "q", false, "no progress on stderr (by default a live bar on a terminal, one line per round otherwise)")
	return cmd
}

func runRun(ctx context.Context, cfg *config.Config, o runOptions, logger *slog.Logger, stdout, stderr io.Writer) error {
	prof, err := cfg.ResolveProfile()
	if err != nil {
		return usageError{err}
	}
	coldProf, err := cfg.ColdProfile()
	if err != nil {
		return usageError{err}
	}
	plan := agent.NewPlan(cfg.Budget, prof, true)
	engines, err := selectEngines(cfg.EffectiveEngines(), o.Engines)
	if err != nil {
		return err
	}

	// One measurement at a time per host: a concurrent agent cycle would
	// share the device and skew both.
	lock, err := hostfs.TryLock(lockPath())
	if err != nil {
		return fmt.Errorf("another layerprobe is measuring on this host; try again when it is done: %w", err)
	}
	defer lock.Unlock()

	v, _, _ := version.Info()
	run := report.Run{SchemaVersion: report.SchemaVersion, LayerprobeVersion: v, Profile: prof.Name,
		Mode: measure.Mode(o.Mode), Rounds: plan.Rounds, Confidence: measure.DefaultConfidence, StartedAt: time.Now().UTC()}
	if plan.Rounds == 0 {
		run.Precision, run.MaxBytes = plan.Precision, plan.MaxBytes
	}
	prog := newProgress(stderr, o.Quiet)
	var failed []string
	for _, ec := range engines {
		er := measureEngine(ctx, cfg, ec, prof, coldProf, plan, measure.Mode(o.Mode), o.startupSizes, logger, prog)
		if er.Error != nil {
			failed = append(failed, er.Error.Message)
		}
		run.BytesWritten += er.BytesWritten
		run.Engines = append(run.Engines, er)
		if ctx.Err() != nil {
			break
		}
	}
	if prog != nil {
		prog.finish()
	}
	run.FinishedAt = time.Now().UTC()
	run.DurationSeconds = run.FinishedAt.Sub(run.StartedAt).Seconds()

	allFailed := len(failed) == len(run.Engines)
	switch {
	case o.Output == "json":
		if err := report.WriteJSON(stdout, run); err != nil {
			return err
		}
	case !allFailed:
		if err := report.WriteTable(stdout, run); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return errors.New("interrupted: the measurement was stopped and its files removed; the output above is partial")
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

func measureEngine(ctx context.Context, cfg *config.Config, ec config.Engine, prof, coldProf fio.Profile, plan probe.Plan, mode measure.Mode,
	startupSizes []int64, logger *slog.Logger, prog progressReporter) (er report.Engine) {
	start := time.Now()
	er = report.Engine{Name: ec.Name, Endpoint: ec.Host, Warnings: []string{}, Results: []measure.Result{}, Samples: []measure.Sample{}}
	defer func() { er.DurationSeconds = time.Since(start).Seconds() }()

	cli, err := connect.Engine(ec, logger)
	if err != nil {
		er.Error = &report.Error{Code: "client", Message: err.Error()}
		return er
	}
	defer cli.Close()
	er.Endpoint = cli.Endpoint()

	opts := agent.ProbeOptions(cfg, ec)
	opts.DeviceWriteIOPS = testThrottleIOPS()
	sess, err := probe.Prepare(ctx, cli, opts, logger)
	if err != nil {
		er.Error = engineError(err, "prepare")
	}
	if sess == nil {
		return er
	}
	defer sess.Close(ctx)
	fillEngine(&er, sess)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6c70))
	var progress func(probe.Progress)
	if prog != nil {
		progress = prog.update
	}
	if mode != measure.ModeCold {
		out := sess.Measure(ctx, prof, plan, 1, rng, progress)
		er.Samples, er.Results, er.Rounds, er.StopReason = out.Samples, out.Results, out.Rounds, out.Stop
		er.BytesWritten = out.BytesWritten
		for _, n := range out.LayoutBytes {
			er.LayoutBytes += n
		}
	}
	if mode != measure.ModeSteady && ctx.Err() == nil {
		// Cold rounds are a fixed number: each one starts a container.
		cold := plan.Rounds
		if cold == 0 {
			cold = prof.MinRounds
		}
		cr, err := sess.RunCold(ctx, coldProf, 1, cold, rng, progress)
		if err != nil {
			er.Error = engineError(err, "cold")
		}
		er.Cold = report.NewCold(cr.Samples, cr.CopyUp, cr.Reflink, cr.Lookup, measure.DefaultConfidence)
		er.BytesWritten += cr.BytesWritten()
		if len(startupSizes) > 0 && ctx.Err() == nil {
			// What the run's byte budget leaves; a spent budget skips
			// every start (1 byte fits none).
			left := plan.MaxBytes
			if left > 0 {
				left = max(left-er.BytesWritten, 1)
			}
			sr, err := sess.RunStartup(ctx, startupSizes, cold, left, rng)
			if err != nil {
				er.Warnings = append(er.Warnings, "start-up cost not measured: "+err.Error())
			} else {
				er.Cold.Startup = &sr.Startup
			}
			if sr.BudgetSkipped {
				// With --mode both the steady state usually spends the
				// whole budget first.
				er.Warnings = append(er.Warnings, fmt.Sprintf("start-up cost only partly measured or not at all: the run's byte budget (%s) was spent; "+
					"give it room with --max-bytes, or measure it alone with --mode cold", config.ByteSize(plan.MaxBytes)))
			}
			er.BytesWritten += sr.BytesWritten
		}
	}
	return er
}

// engineError is an engine's failure in the report: the probe's code and
// message (probe.AsError), or code and err's text.
func engineError(err error, code string) *report.Error {
	pe := probe.AsError(err, code)
	return &report.Error{Code: pe.Code, Message: pe.Message}
}

func fillEngine(er *report.Engine, s *probe.Session) {
	er.EngineFacts = s.Facts()
	er.DriverNote = s.Info.DriverNote
	er.Warnings = append(er.Warnings, s.Warnings...)
}

func selectEngines(all []config.Engine, names []string) ([]config.Engine, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []config.Engine
	for _, n := range names {
		found := false
		for _, e := range all {
			if e.Name == n {
				out = append(out, e)
				found = true
			}
		}
		if !found {
			known := make([]string, len(all))
			for i, e := range all {
				known[i] = e.Name
			}
			return nil, usageError{fmt.Errorf("--engine %q: no such engine, configured: %s", n, strings.Join(known, ", "))}
		}
	}
	return out, nil
}

// lockPath is the host-wide measurement lock. LAYERPROBE_LOCK_FILE moves it,
// for tests that run several private engines side by side.
func lockPath() string {
	if p := os.Getenv("LAYERPROBE_LOCK_FILE"); p != "" {
		return p
	}
	return hostfs.DefaultLockPath
}
