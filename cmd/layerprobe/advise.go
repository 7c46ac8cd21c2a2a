package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/advisor"
	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/engine/connect"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/store"
)

func newAdviseCommand(g *globalOptions) *cobra.Command {
	var output, stateDir string
	var engines []string
	cmd := &cobra.Command{
		Use:   "advise",
		Short: "Show which running containers write into their writable layer, where their writes land, and what to change",
		Long: `Look once at every running container of each configured engine: what it wrote into its
writable layer (a bounded walk of the driver's upper directory, or the engine's own size),
the block writes of its cgroup, what it wrote into its volumes and bind mounts, whether it
is a known database or queue whose data directory is on no volume; then advise, with what
the layer cost it on this host when the agent's measurements are there to say (read from
--state-dir, beside a running agent).

It only lists and inspects containers and reads the host's files: it never execs into,
pauses or changes a container, and writes nothing. It needs to read the engine's data root
(root).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError{fmt.Errorf("--output %q: want table or json", output)}
			}
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("state-dir") {
				cfg.Agent.StateDir = stateDir
			}
			if err := cfg.Validate(); err != nil {
				return usageError{fmt.Errorf("flags: %w", err)}
			}
			ecs, err := selectEngines(cfg.EffectiveEngines(), engines)
			if err != nil {
				return err
			}
			return runAdvise(cmd.Context(), cfg, ecs, output, g.logger, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "table", "output format: table or json (the document of GET /api/v1/containers)")
	f.StringSliceVar(&engines, "engine", nil, "look at only these configured engines (default: all)")
	f.StringVar(&stateDir, "state-dir", config.Default().Agent.StateDir, "the agent's state directory, read (never written) for the measured rounds the layer's cost comes from (default from agent.state_dir)")
	return cmd
}

func runAdvise(ctx context.Context, cfg *config.Config, ecs []config.Engine, output string, logger *slog.Logger, out io.Writer) error {
	samples := func(string) []measure.Sample { return nil }
	st, err := store.OpenReader(cfg.Agent.StateDir, logger)
	switch {
	case err == nil:
		defer st.Close()
		samples = func(engine string) []measure.Sample {
			s, err := st.RecentSamples(ctx, engine, measure.ModeSteady, cfg.Agent.WindowRounds)
			if err != nil {
				logger.Warn("cannot read the agent's rounds; the layer's cost is left out", "engine", engine, "err", err)
			}
			return s
		}
	case errors.Is(err, store.ErrNotFound):
		logger.Debug("no agent store; the layer's cost is left out", "state_dir", cfg.Agent.StateDir)
	default:
		logger.Warn("cannot read the agent's store; the layer's cost is left out", "err", err)
	}

	resp := api.ContainersResponse{GeneratedAt: time.Now().UTC(), Confidence: measure.DefaultConfidence, Engines: []api.EngineContainers{}}
	var failed []string
	for _, ec := range ecs {
		e := adviseEngine(ctx, cfg, ec, samples, logger)
		if e.Error != "" {
			failed = append(failed, fmt.Sprintf("engine %s: %s", ec.Name, e.Error))
		}
		resp.Engines = append(resp.Engines, e)
	}
	if output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(resp); err != nil {
			return fmt.Errorf("write JSON: %w", err)
		}
	} else if err := report.WriteContainers(out, resp); err != nil {
		return err
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// adviseEngine runs one advisor pass over one engine.
func adviseEngine(ctx context.Context, cfg *config.Config, ec config.Engine, samples func(string) []measure.Sample,
	logger *slog.Logger) api.EngineContainers {
	fail := func(err error) api.EngineContainers {
		return api.EngineContainers{Engine: ec.Name, Error: err.Error(), LayerVsVolume: []api.LayerOverhead{}, Containers: []api.Container{}}
	}
	// Through the one place that connects an engine by its type: a
	// containerd engine is asked with containerd's API, never Docker's.
	cli, err := connect.Engine(ec, logger)
	if err != nil {
		return fail(err)
	}
	defer cli.Close()
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	info, err := cli.Info(ictx)
	cancel()
	if err != nil {
		return fail(err)
	}
	adv := advisor.New(advisor.FromConfig(cfg.Advisor), logger.With("engine", ec.Name))
	return adv.Pass(ctx, cli, advisor.Input{Engine: ec.Name, Info: info, Samples: samples(ec.Name), Confidence: measure.DefaultConfidence})
}
