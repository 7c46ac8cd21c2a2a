package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/layerprobe/layerprobe/internal/config"
)

// DefaultConfigPath is read when --config is not given; if it does not
// exist the built-in defaults serve.
const DefaultConfigPath = "/etc/layerprobe/config.yaml"

type globalOptions struct {
	ConfigPath string
	LogLevel   string
	LogFormat  string

	logger *slog.Logger
}

func (g *globalOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&g.ConfigPath, "config", DefaultConfigPath, "configuration file (with no file at the default path, built-in defaults serve)")
	fs.StringVar(&g.LogLevel, "log.level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&g.LogFormat, "log.format", "logfmt", "log format: logfmt or json")
}

// loadConfig reads the configuration: the file if it exists (or was named
// explicitly), else the built-in defaults.
func (g *globalOptions) loadConfig(cmd *cobra.Command) (*config.Config, error) {
	explicit := cmd.Flags().Changed("config")
	if !explicit {
		if _, err := os.Stat(g.ConfigPath); errors.Is(err, os.ErrNotExist) {
			return config.Default(), nil
		}
	}
	c, err := config.Load(g.ConfigPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, usageError{fmt.Errorf("--config %s: file does not exist", g.ConfigPath)}
		}
		return nil, err
	}
	return c, nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, usageError{fmt.Errorf("--log.level %q: want debug, info, warn or error", level)}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "logfmt":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, usageError{fmt.Errorf("--log.format %q: want logfmt or json", format)}
	}
}

func newRootCommand() *cobra.Command {
	var g globalOptions
	cmd := &cobra.Command{
		Use:   "layerprobe",
		Short: "Measure how much slower storage is inside Docker containers than on the host",
		Long: `layerprobe measures, with fio and honest error bars, how much slower storage is in a
container's writable layer, in bind mounts and in named volumes than on the host,
for sequential writes, 4 KiB random writes and fsync-heavy random read/write.

EXIT STATUS
  0  success
  1  the command ran and something failed (engine unreachable, a measurement failed, ...)
  2  invalid flags or configuration`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			g.logger, err = newLogger(cmd.ErrOrStderr(), g.LogLevel, g.LogFormat)
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	g.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		newAgentCommand(&g),
		newRunCommand(&g),
		newOverheadCommand(&g),
		newAdviseCommand(&g),
		newConfigCommand(&g),
		newCleanupCommand(&g),
		newVersionCommand(),
		newProbeHelperCommand(),
	)
	return cmd
}
