package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/agent"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/fio"
)

type agentOptions struct {
	ListenAddresses []string
	WebConfigFile   string
	SystemdSocket   bool
	Interval        time.Duration
	Profile         string
	StateDir        string
	APITokenFile    string
	MetricsDetail   bool
}

func newAgentCommand(g *globalOptions) *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Measure on a schedule and serve the results (Prometheus /metrics and the REST API)",
		Long: `Run measurement cycles on every configured engine on a schedule (first soon after
start, then every --interval with jitter, never overlapping), keep the history in the
state directory, and serve /metrics and the REST API (/api/v1/...) from the cached
results: a scrape never runs fio.

SIGTERM or SIGINT stop the running cycle (fio is stopped and its files removed, the
cycle is recorded as interrupted) and exit 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("web.listen-address") {
				cfg.Agent.ListenAddress = o.ListenAddresses[0]
			} else {
				o.ListenAddresses = []string{cfg.Agent.ListenAddress}
			}
			if f.Changed("web.config.file") {
				cfg.Agent.WebConfigFile = o.WebConfigFile
			}
			if f.Changed("interval") {
				cfg.Agent.Interval = o.Interval
			}
			if f.Changed("profile") {
				cfg.Profile = o.Profile
			}
			if f.Changed("state-dir") {
				cfg.Agent.StateDir = o.StateDir
			}
			if f.Changed("api-token-file") {
				cfg.Agent.APITokenFile = o.APITokenFile
			}
			if f.Changed("metrics.detail") {
				cfg.Agent.MetricsDetail = o.MetricsDetail
			}
			if err := cfg.Validate(); err != nil {
				return usageError{fmt.Errorf("flags: %w", err)}
			}
			return runAgent(cmd.Context(), cfg, o, g.logger)
		},
	}
	// The defaults shown are the configuration's (config.Default()); a flag
	// given overrides the file, an absent one leaves the file's value.
	def := config.Default()
	f := cmd.Flags()
	f.StringSliceVar(&o.ListenAddresses, "web.listen-address", []string{def.Agent.ListenAddress}, "addresses to listen on for /metrics and the API (repeatable; overrides agent.listen_address)")
	f.StringVar(&o.WebConfigFile, "web.config.file", "", "exporter-toolkit web configuration file: TLS and basic auth for every route")
	f.BoolVar(&o.SystemdSocket, "web.systemd-socket", false, "use systemd socket activation listeners instead of port listeners")
	f.DurationVar(&o.Interval, "interval", def.Agent.Interval, "time between cycles (overrides agent.interval)")
	f.StringVar(&o.Profile, "profile", def.Profile, "built-in fio profile: "+strings.Join(fio.ProfileNames(), ", ")+" (overrides profile)")
	f.StringVar(&o.StateDir, "state-dir", def.Agent.StateDir, "directory for the history database (overrides agent.state_dir)")
	f.StringVar(&o.APITokenFile, "api-token-file", "", "file holding the bearer token that POST /api/v1/cycles requires; without one that route answers 403")
	f.BoolVar(&o.MetricsDetail, "metrics.detail", def.Agent.MetricsDetail, "expose every figure on /metrics, not only each target's headline and the top 3 containers (overrides agent.metrics_detail)")
	return cmd
}

func runAgent(ctx context.Context, cfg *config.Config, o agentOptions, logger *slog.Logger) error {
	var token []byte
	if cfg.Agent.APITokenFile != "" {
		b, err := os.ReadFile(cfg.Agent.APITokenFile)
		if err != nil {
			return usageError{fmt.Errorf("--api-token-file: %w", err)}
		}
		token = bytes.TrimSpace(b)
		if len(token) < 16 {
			return usageError{fmt.Errorf("--api-token-file %s: the token must be at least 16 characters", cfg.Agent.APITokenFile)}
		}
	}
	webCfg := cfg.Agent.WebConfigFile
	if webCfg != "" {
		if err := web.Validate(webCfg); err != nil {
			return usageError{fmt.Errorf("--web.config.file %s: %w", webCfg, err)}
		}
		if len(token) > 0 && hasBasicAuthUsers(webCfg) {
			// Basic auth and the bearer token both need the one
			// Authorization header: no request can carry both.
			logger.Warn("--web.config.file sets basic_auth_users, which takes the Authorization header that POST /api/v1/cycles needs for its bearer token: " +
				"triggering cycles over the API is impossible; protect the agent with TLS client certificates (client_auth_type) instead of basic auth to keep it (docs/security.md)")
		}
	}
	if os.Geteuid() == 0 {
		logger.Info("running as root; the agent needs no capability, only the Docker socket and its directories, and CAP_SYS_ADMIN in a private cgroup namespace (see docs/security.md, also for running without root)")
	}
	mem := agentMemoryTuning(os.Getenv)
	mem.apply(logger)
	a, err := agent.New(agent.Options{
		Config: cfg, Logger: logger, APIToken: token, LockPath: lockPath(),
		ThrottleWriteIOPS: testThrottleIOPS(),
		JobTimeout:        testJobTimeout(),
		FirstCycleDelay:   testFirstCycleDelay(),
		KeepFreedMemory:   !mem.releaseAfterCycle,
		WebFlags: &web.FlagConfig{
			WebListenAddresses: &o.ListenAddresses,
			WebSystemdSocket:   &o.SystemdSocket,
			WebConfigFile:      &webCfg,
		},
	})
	if err != nil {
		return err
	}
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// hasBasicAuthUsers reports whether the exporter-toolkit web configuration
// file (already validated) lists basic auth users.
func hasBasicAuthUsers(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var wc struct {
		Users map[string]yaml.Node `yaml:"basic_auth_users"`
	}
	return yaml.Unmarshal(b, &wc) == nil && len(wc.Users) > 0
}
