package main

import (
	"github.com/spf13/cobra"

	"github.com/layerprobe/layerprobe/internal/helper"
)

// newProbeHelperCommand is the in-container helper: the probe image carries
// this binary, and the probe container's process and housekeeping run it.
func newProbeHelperCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "probe-helper idle|kill-fio|clean DIR...|copyup FILE...|cgexec DIR... -- PROGRAM ARG...",
		Short:              "Helper run inside the probe container (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		PersistentPreRunE:  func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			return helper.Run(cmd.Context(), args)
		},
	}
}
