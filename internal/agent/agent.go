// Package agent wires layerprobe's long-running agent: a scheduler that runs
// one measurement cycle at a time on every configured engine, the guardrails
// that keep it off busy hosts and within its write budget, the store that
// keeps the history, the fsync regression detector, and the HTTP server
// (REST API and /metrics) that serves the cached results.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/layerprobe/layerprobe/internal/advisor"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/detector"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/engine/connect"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/httpapi"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/metrics"
	"github.com/layerprobe/layerprobe/internal/probe"
	"github.com/layerprobe/layerprobe/internal/store"
)

// Options configure an agent beyond its configuration file.
type Options struct {
	Config   *config.Config
	Logger   *slog.Logger
	WebFlags *web.FlagConfig // listen addresses, TLS / basic auth file
	APIToken []byte          // nil: POST /api/v1/cycles is refused with 403
	// LockPath is the host-wide measurement lock (hostfs.DefaultLockPath).
	LockPath string
	// ThrottleWriteIOPS throttles the probe containers' writes (tests).
	ThrottleWriteIOPS uint64
	// HelperBinary runs the host arm of the smallfiles workload ("":
	// this program; probe.Options.HelperBinary). Tests of a binary other
	// than layerprobe set it.
	HelperBinary string
	// FirstCycleDelay is how soon after start the first cycle runs.
	FirstCycleDelay time.Duration
	// JobTimeout, when positive, replaces the timeout of every fio job of
	// the profile (tests: a hung fio times out in seconds).
	JobTimeout time.Duration
	// KeepFreedMemory skips returning the memory a cycle freed to the
	// operating system after start-up and after every cycle (benchmarks:
	// the figure without the agent's memory tuning).
	KeepFreedMemory bool
}

// Agent is a running layerprobe agent.
type Agent struct {
	cfg      *config.Config
	opts     Options
	logger   *slog.Logger
	prof     fio.Profile
	coldProf fio.Profile // the profile's fsync job alone (config.ColdProfile)
	det      detector.Params
	store    *store.Store
	engines  []*engineState
	rng      *rand.Rand
	now      func() time.Time
	procRoot string
	sysRoot  string
	// newEngine connects to a configured engine (connect.Engine; tests use
	// fakes).
	newEngine func(config.Engine, *slog.Logger) (engine.Client, error)

	running   atomic.Bool     // a cycle runs (or an API trigger is queued)
	triggerCh chan apiTrigger // API triggers, buffered 1
	// pending are the cycles an API trigger recorded, by engine, until
	// begin takes them; the scheduler goroutine's alone.
	pending map[string]*store.Cycle
	coldDue time.Time // the next regular cold cycle; the loop's alone
	ready   atomic.Bool
	snap    atomic.Pointer[metrics.Snapshot]
	mu      sync.Mutex // guards the engines' published state
	started time.Time
}

// New checks the options; Run starts the agent.
func New(o Options) (*Agent, error) {
	if o.Config == nil || o.Logger == nil {
		return nil, errors.New("agent: config and logger are required")
	}
	prof, err := o.Config.ResolveProfile()
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if err := o.Config.RoundFits(o.Config.Agent.Budget.MaxBytes); err != nil {
		return nil, fmt.Errorf("agent: agent.budget.max_bytes %w", err)
	}
	for _, d := range o.Config.Deprecated {
		o.Logger.Warn("deprecated configuration key, still honoured", "key", d.Old, "write", d.New, "line", d.Line)
	}
	coldProf, err := o.Config.ColdProfile()
	if err != nil {
		return nil, fmt.Errorf("agent: cold cycles: %w", err)
	}
	if o.JobTimeout > 0 {
		for _, p := range []*fio.Profile{&prof, &coldProf} {
			for i := range p.Jobs {
				p.Jobs[i].Timeout = o.JobTimeout
			}
		}
	}
	if o.FirstCycleDelay <= 0 {
		o.FirstCycleDelay = 5 * time.Second
	}
	a := &Agent{
		cfg: o.Config, opts: o, logger: o.Logger, prof: prof, coldProf: coldProf,
		det:       detector.ParamsFrom(o.Config.Detector),
		rng:       rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x61676e74)),
		now:       time.Now,
		procRoot:  "/proc",
		sysRoot:   "/sys",
		triggerCh: make(chan apiTrigger, 1),
		newEngine: connect.Engine,
	}
	a.snap.Store(&metrics.Snapshot{})
	return a, nil
}

// Run opens the store, serves HTTP and runs cycles until ctx ends. A
// cancelled ctx stops the running cycle (fio is stopped and its files
// removed, the cycle is recorded as interrupted) and Run returns nil.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	defer a.close(ctx)
	// Before anything is written, what will be: an operator's first
	// question about a new agent on a production host.
	out := NewOutlook(a.cfg, a.prof, a.coldProf, a.opts.FirstCycleDelay)
	a.logger.Info("this agent writes "+out.String(), "first_hour_bytes", out.FirstHour, "first_day_bytes", out.FirstDay,
		"per_day_bytes", out.PerDay, "first_cycle_bytes", out.FirstFill, "cycle_bytes", out.Steady,
		"first_cold_cycle_bytes", out.FirstCold, "cold_cycle_bytes", out.Cold, "startup_image_bytes", out.Startup)
	a.publish()

	srvErr := make(chan error, 1)
	srv := a.newServer()
	go func() { srvErr <- web.ListenAndServe(srv, a.opts.WebFlags, a.logger) }()

	// A first look at every engine, so /readyz and /api/v1/engines answer
	// before the first cycle.
	for _, e := range a.engines {
		if _, err := a.refreshInfo(ctx, e); err != nil {
			a.logger.Error("the engine does not answer; the agent keeps serving and looks again at every cycle", "engine", e.cfg.Name, "err", err)
		}
	}
	a.ready.Store(true)
	a.publish()
	// Start-up (flags, configuration, store, engines) touched code that
	// the agent does not run again.
	a.releaseMemory()

	err := a.loop(ctx, srvErr)

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		a.logger.Warn("http shutdown", "err", serr)
	}
	return err
}

// open opens the store and connects to every configured engine, with
// what the store remembers of it.
func (a *Agent) open(ctx context.Context) error {
	a.started = a.now()
	st, err := store.Open(a.cfg.Agent.StateDir, a.logger)
	if err != nil {
		return fmt.Errorf("open state directory: %w", err)
	}
	a.store = st
	for _, ec := range a.cfg.EffectiveEngines() {
		cli, err := a.newEngine(ec, a.logger)
		if err != nil {
			a.close(ctx)
			return fmt.Errorf("engine %s: %w", ec.Name, err)
		}
		e := newEngineState(ec, cli)
		e.adv = advisor.New(advisor.FromConfig(a.cfg.Advisor), a.logger.With("engine", ec.Name))
		a.restore(ctx, e)
		a.engines = append(a.engines, e)
	}
	return nil
}

// close removes the probe sessions and closes the engines and the store.
func (a *Agent) close(ctx context.Context) {
	for _, e := range a.engines {
		e.closeSession(ctx)
		_ = e.cli.Close()
	}
	if err := a.store.Close(); err != nil {
		a.logger.Error("close store", "err", err)
	}
}

func (a *Agent) newServer() *http.Server {
	reg := metrics.NewRegistry(a, a.cfg.Agent.MetricsDetail)
	h := httpapi.New(httpapi.Options{
		Source:   a,
		Metrics:  metrics.Handler(reg, a.logger),
		Logger:   a.logger,
		APIToken: a.opts.APIToken,
	})
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// loop is the scheduler: one cycle at a time, first soon after start, then
// every interval with jitter; API triggers run between scheduled cycles.
func (a *Agent) loop(ctx context.Context, srvErr <-chan error) error {
	timer := time.NewTimer(a.opts.FirstCycleDelay)
	defer timer.Stop()
	// The cold probe has its own timer; a nil channel (cold probe off)
	// never fires.
	var coldC <-chan time.Time
	var coldTimer *time.Timer
	if a.cfg.Agent.ColdInterval > 0 {
		first := a.firstColdDelay(ctx)
		a.coldDue = a.now().Add(first)
		coldTimer = time.NewTimer(first)
		defer coldTimer.Stop()
		coldC = coldTimer.C
	}
	for {
		a.publishNext()
		select {
		case <-ctx.Done():
			a.logger.Info("stopping")
			return nil
		case err := <-srvErr:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http server: %w", err)
			}
			return nil
		case tr := <-a.triggerCh:
			// TriggerCycle set running already, and recorded the cycles.
			a.pending = tr.started
			if tr.mode == measure.ModeCold {
				a.coldAll(ctx, triggerAPI)
			} else {
				a.cycleAll(ctx, triggerAPI)
			}
			a.dropPending(ctx)
			a.running.Store(false)
		case <-coldC:
			if a.running.CompareAndSwap(false, true) {
				// A timer never fires early; the second covers a clock
				// read a moment before the one that set coldDue.
				regular := !a.coldDue.After(a.now().Add(time.Second))
				coldTimer.Reset(a.scheduledCold(ctx, regular))
				a.running.Store(false)
			} else if rb := a.cfg.Agent.RetryBackoff; rb > 0 {
				// Another cycle runs: try again soon rather than an
				// interval later (what is due stays due).
				coldTimer.Reset(min(rb, a.cfg.Agent.ColdInterval))
			} else {
				a.coldDue = a.now().Add(a.jittered(a.cfg.Agent.ColdInterval))
				coldTimer.Reset(a.untilColdDue())
			}
		case <-timer.C:
			if a.running.CompareAndSwap(false, true) {
				a.scheduledCycles(ctx)
				a.running.Store(false)
			} else {
				// An API trigger is queued: it serves as the due cycles.
				a.postponeDue()
			}
			timer.Reset(a.untilDue())
		}
	}
}

// publishNext publishes when each engine's next steady and cold cycles
// are due, for the surfaces that say when an interval still missing
// comes. It runs on the scheduler goroutine, which owns the due times.
func (a *Agent) publishNext() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.engines {
		e.nextSteady = e.due
		if e.nextSteady.IsZero() {
			e.nextSteady = a.started.Add(a.opts.FirstCycleDelay)
		}
		e.nextCold = time.Time{}
		if a.cfg.Agent.ColdInterval > 0 {
			e.nextCold = a.coldDue
			if r := e.cold.retryAt; !r.IsZero() && r.Before(e.nextCold) {
				e.nextCold = r
			}
		}
	}
}

// scheduledCycles runs a steady cycle on every engine that is due (all of
// them the first time) and schedules each engine's next one: after the
// interval when the cycle measured, after a short, growing backoff when it
// was skipped or failed, so that a host that was busy at start, or briefly,
// gets its result within minutes instead of an interval later.
func (a *Agent) scheduledCycles(ctx context.Context) {
	now := a.now()
	var due []*engineState
	for _, e := range a.engines {
		if !e.due.After(now) {
			due = append(due, e)
		}
	}
	a.steadyCycles(ctx, due, func(e *engineState) string {
		if e.backoff > 0 {
			return triggerRetry
		}
		return triggerSchedule
	}, a.reschedule)
}

// reschedule sets when the engine's next scheduled cycle is due after one
// that ended with result.
func (a *Agent) reschedule(e *engineState, result string) {
	if initial := a.cfg.Agent.RetryBackoff; initial > 0 && (result == ResultSkipped || result == ResultFailed) {
		e.backoff = nextBackoff(e.backoff, initial, a.cfg.Agent.Interval)
		e.due = a.now().Add(e.backoff)
		a.logger.Info("next cycle soon", "engine", e.cfg.Name, "after", result, "in", e.backoff.String())
		return
	}
	e.backoff = 0
	e.due = a.now().Add(a.nextInterval())
}

// nextBackoff is the wait before the next retry: initial after the first
// miss, then doubling, never above limit (the interval).
func nextBackoff(prev, initial, limit time.Duration) time.Duration {
	if prev <= 0 {
		return min(initial, limit)
	}
	return min(2*prev, limit)
}

// postponeDue moves every due engine one interval on.
func (a *Agent) postponeDue() {
	now := a.now()
	for _, e := range a.engines {
		if !e.due.After(now) {
			e.due = now.Add(a.nextInterval())
		}
	}
}

// untilDue is the time until the next engine is due.
func (a *Agent) untilDue() time.Duration {
	now := a.now()
	next := time.Duration(math.MaxInt64)
	for _, e := range a.engines {
		next = min(next, e.due.Sub(now))
	}
	return max(next, 0)
}

// nextInterval is the interval with a uniform jitter of +-jitter, so a
// fleet started together does not measure in lockstep.
func (a *Agent) nextInterval() time.Duration {
	return a.jittered(a.cfg.Agent.Interval)
}

// jittered spreads iv by +-jitter.
func (a *Agent) jittered(iv time.Duration) time.Duration {
	j := a.cfg.Agent.Jitter
	f := 1 + j*(2*a.rng.Float64()-1)
	return time.Duration(float64(iv) * f)
}

// cycleAll runs one steady cycle on every engine now.
func (a *Agent) cycleAll(ctx context.Context, trigger string) {
	a.steadyCycles(ctx, a.engines, func(*engineState) string { return trigger }, nil)
}

// steadyCycles runs one steady cycle on each of engines, with its
// confirmation rounds when the detector asks for them, tells done (when
// set) how each cycle ended, and publishes.
func (a *Agent) steadyCycles(ctx context.Context, engines []*engineState, trigger func(*engineState) string,
	done func(*engineState, string)) {
	for _, e := range engines {
		if ctx.Err() != nil {
			return
		}
		if a.cfg.Advisor.Enabled {
			a.advise(ctx, e)
		}
		result, suspect := a.cycle(ctx, e, trigger(e), a.prof)
		if suspect && ctx.Err() == nil {
			a.confirm(ctx, e, a.prof)
		}
		if done != nil {
			done(e, result)
		}
	}
	if n, err := a.store.Prune(ctx, a.now().Add(-a.cfg.Agent.Retention)); err != nil {
		a.logger.Warn("prune history", "err", err)
	} else if n > 0 {
		a.logger.Info("pruned old cycles", "cycles", n)
	}
	a.publish()
	a.releaseMemory()
}

// releaseMemory returns the heap a cycle freed to the operating system:
// after start-up and after every cycle.
//
// A cycle allocates several times the idle heap (the probe image's files
// are read and hashed, fio's JSON decoded), and the Go runtime otherwise
// gives those pages back only gradually: the agent would idle for an hour
// with anonymous memory several MiB above what it uses. One forced
// collection per cycle costs a few milliseconds of CPU.
//
// The binary's own mapped pages are left alone: they are clean, shared
// copies of the file that the kernel reclaims when it needs the memory
// (docs/configuration.md, "The agent's memory").
func (a *Agent) releaseMemory() {
	if a.opts.KeepFreedMemory {
		return
	}
	debug.FreeOSMemory()
}

// refreshInfo asks the engine what it is; failures are kept for display.
func (a *Agent) refreshInfo(ctx context.Context, e *engineState) (engine.Info, error) {
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := e.cli.Info(ictx)
	if err != nil {
		err = explainUnreachable(e.cli.Endpoint(), err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e.looked = true
	if err != nil {
		e.reachable = false
		e.infoErr = err.Error()
		return info, err
	}
	e.reachable, e.infoErr, e.info = true, "", info
	return info, nil
}

// explainUnreachable says what is missing when the engine's endpoint is a
// Unix socket that does not exist: the engine is not running on this host,
// or its socket is elsewhere, or not mounted into the agent's container
// (a DaemonSet labelled for the wrong engine).
func explainUnreachable(endpoint string, err error) error {
	sock, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return err
	}
	if _, serr := os.Stat(sock); !errors.Is(serr, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("the engine's socket %s does not exist: is the engine running on this host, with its socket there (and, in a container, is the socket's directory mounted)? %w", sock, err)
}

// probeOptions are the session options for an engine: the configured
// ones (ProbeOptions), the image kept across cycles.
func (a *Agent) probeOptions(ec config.Engine) probe.Options {
	o := ProbeOptions(a.cfg, ec)
	o.DeviceWriteIOPS, o.KeepImage, o.HelperBinary = a.opts.ThrottleWriteIOPS, true, a.opts.HelperBinary
	return o
}
