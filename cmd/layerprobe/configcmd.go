package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

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
still work, are named on stderr with their new names.

With neither FILE nor --config, and no file at the default path, the agent runs
on its built-in defaults: config check says so, prints them as a configuration
file (every key at its default) and exits 0. A FILE or --config that does not
exist is an error (exit 2).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := g.ConfigPath
			explicit := cmd.Flags().Changed("config")
			if len(args) == 1 {
				path, explicit = args[0], true
			}
			cfg, err := config.Load(path)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					if !explicit {
						// The same rule as loadConfig: no file at the
						// default path means the built-in defaults serve.
						return printDefaults(cmd.OutOrStdout(), path)
					}
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

// printDefaults writes the built-in defaults as a configuration file, under
// a comment that says why: what the agent runs on when path does not exist.
// The output is itself a valid file (config check's tests load it back).
func printDefaults(w io.Writer, path string) error {
	doc, err := yaml.Marshal(config.Default())
	if err != nil {
		return fmt.Errorf("print the built-in defaults: %w", err)
	}
	_, err = fmt.Fprintf(w, "# %s: no such file; the built-in defaults apply (docs/configuration.md).\n"+
		"# They are, as a configuration file:\n%s", path, doc)
	return err
}
