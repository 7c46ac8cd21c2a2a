package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/layerprobe/layerprobe/internal/config"
)

// The defaults --help shows are the configuration's: a flag that is not
// given leaves the configuration alone, so a different default in the help
// text would be a lie about what the agent does.
func TestHelpShowsConfigDefaults(t *testing.T) {
	def := config.Default()
	tests := []struct {
		command, flag, want string
	}{
		{"agent", "interval", def.Agent.Interval.String()},
		{"agent", "state-dir", strconv.Quote(def.Agent.StateDir)},
		{"agent", "profile", strconv.Quote(def.Profile)},
		{"agent", "web.listen-address", "[" + def.Agent.ListenAddress + "]"},
		{"run", "profile", strconv.Quote(def.Profile)},
		{"run", "precision", strconv.FormatFloat(def.Precision, 'g', -1, 64)},
		{"run", "max-bytes", strconv.Quote(def.MaxBytes.String())},
	}
	help := map[string]string{}
	for _, tt := range tests {
		if _, ok := help[tt.command]; !ok {
			var out bytes.Buffer
			cmd := newRootCommand()
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs([]string{tt.command, "--help"})
			if err := cmd.Execute(); err != nil {
				t.Fatalf("%s --help: %v", tt.command, err)
			}
			help[tt.command] = out.String()
		}
		line := regexp.MustCompile(`(?m)^\s+--` + regexp.QuoteMeta(tt.flag) + ` .*$`).FindString(help[tt.command])
		m := regexp.MustCompile(`\(default ([^()]*)\)$`).FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s --help: no default for --%s in %q", tt.command, tt.flag, line)
			continue
		}
		if m[1] != tt.want {
			t.Errorf("%s --help: --%s default %s, the configuration's is %s", tt.command, tt.flag, m[1], tt.want)
		}
	}
	// --rounds 0 (adaptive) is pflag's zero value, which it does not print;
	// it must be the configuration's default all the same.
	if def.Rounds != 0 {
		t.Errorf("config default rounds %d; the run --help text says 0 is the default", def.Rounds)
	}
}

func TestVersionFlag(t *testing.T) {
	var flag, sub bytes.Buffer
	for _, c := range []struct {
		args []string
		out  *bytes.Buffer
	}{{[]string{"--version"}, &flag}, {[]string{"version"}, &sub}} {
		cmd := newRootCommand()
		cmd.SetOut(c.out)
		cmd.SetArgs(c.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
	}
	if flag.String() != sub.String() || !regexp.MustCompile(`^layerprobe \S+ \(.*go1\.\d+.*\)\n$`).MatchString(flag.String()) {
		t.Errorf("--version %q, version %q; want the same version line", flag.String(), sub.String())
	}
}
