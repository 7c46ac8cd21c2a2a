package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/engine/connect"
	"github.com/layerprobe/layerprobe/internal/hostfs"
)

func newCleanupCommand(g *globalOptions) *cobra.Command {
	var force, keepImages bool
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what a killed layerprobe left behind (containers, volumes, images, scratch files)",
		Long: `Remove every container, volume and image labelled io.layerprobe.managed=true and the
per-process scratch directories, on each configured engine. Things that belong to a
layerprobe process that is still running (an agent, another run) are kept unless --force.
Nothing is found by name: only by label, or by the owner token layerprobe names its
scratch directories with.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			return runCleanup(cmd.Context(), cfg, force, !keepImages, g.logger, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "also remove what running layerprobe processes own")
	cmd.Flags().BoolVar(&keepImages, "keep-images", false, "keep the probe images (they are rebuilt on the next run otherwise)")
	return cmd
}

func runCleanup(ctx context.Context, cfg *config.Config, force, images bool, logger *slog.Logger, out io.Writer) error {
	alive := hostfs.Alive
	if force {
		alive = nil
	}
	var errs []error
	for _, ec := range cfg.EffectiveEngines() {
		cli, err := connect.Engine(ec, logger)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep, err := cleanupEngine(ctx, cli, ec, alive, images)
		cli.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("engine %s: %w", ec.Name, err))
		}
		for _, c := range rep.Containers {
			fmt.Fprintf(out, "removed container %s (engine %s)\n", c, ec.Name)
		}
		for _, v := range rep.Volumes {
			fmt.Fprintf(out, "removed volume %s (engine %s)\n", v, ec.Name)
		}
		for _, i := range rep.Images {
			fmt.Fprintf(out, "removed image %s (engine %s)\n", i, ec.Name)
		}
		for _, s := range rep.Snapshots {
			fmt.Fprintf(out, "removed snapshot %s (engine %s)\n", s, ec.Name)
		}
		for _, l := range rep.Leases {
			fmt.Fprintf(out, "removed lease %s (engine %s)\n", l, ec.Name)
		}
		for _, d := range rep.dirs {
			fmt.Fprintf(out, "removed directory %s\n", d)
		}
	}
	return errors.Join(errs...)
}

type cleanupReport struct {
	engine.SweepReport
	dirs []string
}

// sweeper is what cleanup needs of an engine.
type sweeper interface {
	Info(ctx context.Context) (engine.Info, error)
	Sweep(ctx context.Context, alive func(owner string) bool, includeImages bool) (engine.SweepReport, error)
}

func cleanupEngine(ctx context.Context, cli sweeper, ec config.Engine, alive func(string) bool, images bool) (cleanupReport, error) {
	var rep cleanupReport
	info, err := cli.Info(ctx)
	if err != nil {
		return rep, err
	}
	// Containers first: they hold the volumes and the images.
	rep.SweepReport, err = cli.Sweep(ctx, alive, images)
	if err != nil {
		return rep, err
	}
	scratch := ec.ScratchDir
	if scratch == "" {
		scratch = filepath.Join(info.DataRoot, "layerprobe-scratch")
	}
	rep.dirs, err = hostfs.SweepScratch(scratch, alive)
	if err != nil {
		return rep, err
	}
	// The scratch root itself goes when nothing is left in it.
	if entries, rerr := os.ReadDir(scratch); rerr == nil && len(entries) == 0 {
		if os.Remove(scratch) == nil {
			rep.dirs = append(rep.dirs, scratch)
		}
	}
	return rep, nil
}
