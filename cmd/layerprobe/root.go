package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/common/promslog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/version"
)

// defaultConfigPath is read when --config is not given; if it does not
// exist the built-in defaults serve. A variable only so that tests can
// point it at a missing file.
var defaultConfigPath = "/etc/layerprobe/config.yaml"

type globalOptions struct {
	ConfigPath string
	LogLevel   string
	LogFormat  string

	logger *slog.Logger
}

func (g *globalOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&g.ConfigPath, "config", defaultConfigPath, "configuration file (with no file at the default path, built-in defaults serve)")
	fs.StringVar(&g.LogLevel, "log.level", "info", "log level: "+strings.Join(promslog.LevelFlagOptions, ", "))
	fs.StringVar(&g.LogFormat, "log.format", "logfmt", "log format: "+strings.Join(promslog.FormatFlagOptions, " or "))
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

// newLogger is the Prometheus exporters' logger (promslog): logfmt or
// JSON, the level and format names node_exporter and Prometheus take.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	cfg := &promslog.Config{Level: promslog.NewLevel(), Format: promslog.NewFormat(), Writer: w}
	if err := cfg.Level.Set(level); err != nil {
		return nil, usageError{fmt.Errorf("--log.level %q: want %s", level, strings.Join(promslog.LevelFlagOptions, ", "))}
	}
	if err := cfg.Format.Set(format); err != nil {
		return nil, usageError{fmt.Errorf("--log.format %q: want %s", format, strings.Join(promslog.FormatFlagOptions, " or "))}
	}
	return promslog.New(cfg), nil
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
		// --version, as every Prometheus exporter has; the same line as
		// `layerprobe version`.
		Version: version.String(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			g.logger, err = newLogger(cmd.ErrOrStderr(), g.LogLevel, g.LogFormat)
			return err
		},
	}
	cmd.SetVersionTemplate("{{.Version}}\n")
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
