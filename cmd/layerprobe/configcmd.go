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
		Long: `Validate a configuration file (default: --config) and print "FILE: valid", or
every problem with its line, and exit 2 if it is invalid. Deprecated keys, which
still work, are named on stderr with their new names.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := g.ConfigPath
			if len(args) == 1 {
				path = args[0]
			}
			cfg, err := config.Load(path)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return usageError{err}
				}
				return err
			}
			for _, d := range cfg.Deprecated {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: warning: %s\n", path, d)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", path)
			return err
		},
	})
	return cmd
}
