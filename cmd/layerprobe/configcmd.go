package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/layerprobe/layerprobe/internal/config"
)

func newConfigCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with the configuration file",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate a configuration file (default: --config); exit 2 if it is invalid",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := g.ConfigPath
			if len(args) == 1 {
				path = args[0]
			}
			if _, err := config.Load(path); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return usageError{err}
				}
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", path)
			return err
		},
	})
	return cmd
}
