package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

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
		{"run", "precision", strconv.FormatFloat(def.Budget.Precision, 'g', -1, 64)},
		{"run", "max-bytes", strconv.Quote(def.Budget.MaxBytes.String())},
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
	if def.Budget.Rounds != 0 {
		t.Errorf("config default rounds %d; the run --help text says 0 is the default", def.Budget.Rounds)
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
	if flag.String() != sub.String() || !regexp.MustCompile(`^layerprobe, version \S+ \(revision: \S+\)\n(  [a-z ]+: +.*\n){4}$`).MatchString(flag.String()) {
		t.Errorf("--version %q, version %q; want the same Prometheus-style version block", flag.String(), sub.String())
	}
}

// TestRunRefusesABudgetBelowOneRound: a byte budget that cannot hold one
// round of the profile's costliest job is a usage error naming the flag and
// what would do, before anything is measured; --max-bytes 0 lifts it.
func TestRunRefusesABudgetBelowOneRound(t *testing.T) {
	run := func(args ...string) error {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"run"}, args...))
		return cmd.Execute()
	}
	err := run("--profile", "long")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--max-bytes") || !strings.Contains(err.Error(), "at least that") ||
		!strings.Contains(err.Error(), "65600MiB") {
		t.Errorf("run --profile long with the default budget: %v, want a usage error naming --max-bytes and 65600MiB", err)
	}
	// Past the budget check, the unknown engine is what stops it.
	if err := run("--profile", "long", "--max-bytes", "0", "--engine", "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("run --profile long --max-bytes 0: %v, want the engine error", err)
	}
	if err := run("--engine", "nope"); err == nil || strings.Contains(err.Error(), "max-bytes") {
		t.Errorf("run with the defaults: %v, want no budget error", err)
	}
}

// TestConfigCheckWarnsOfDeprecatedKeys: a file with an old key is valid,
// and config check names the key and its new name on stderr.
func TestConfigCheckWarnsOfDeprecatedKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte("agent:\n  cycle_max_bytes: 1GiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"config", "check", path})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if out.String() != path+": valid\n" {
		t.Errorf("stdout %q, want %q", out.String(), path+": valid\n")
	}
	want := "line 2: agent.cycle_max_bytes is deprecated, write agent.budget.max_bytes"
	if !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q, want it to contain %q", errOut.String(), want)
	}
}

// TestConfigCheckWithoutFile: with no file at the default path, config
// check says the built-in defaults apply, prints them as a file that loads
// back to the defaults, and succeeds; a named file that is missing is a
// usage error.
func TestConfigCheckWithoutFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "config.yaml")
	exec := func(args ...string) (string, error) {
		cmd := newRootCommand()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	old := defaultConfigPath
	defaultConfigPath = missing
	defer func() { defaultConfigPath = old }()

	out, err := exec("config", "check")
	if err != nil {
		t.Fatalf("config check with no file at the default path: %v, want success", err)
	}
	if !strings.Contains(out, missing+": no such file; the built-in defaults apply") {
		t.Errorf("stdout does not say that the built-in defaults apply:\n%s", out)
	}
	printed := filepath.Join(t.TempDir(), "printed.yaml")
	if err := os.WriteFile(printed, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(printed)
	if err != nil {
		t.Fatalf("the printed defaults do not load: %v\n%s", err, out)
	}
	// Compared as documents: an empty list and no list load alike.
	gotDoc, _ := yaml.Marshal(got)
	wantDoc, _ := yaml.Marshal(config.Default())
	if string(gotDoc) != string(wantDoc) {
		t.Errorf("the printed defaults load as\n%s\nwant\n%s", gotDoc, wantDoc)
	}

	for _, args := range [][]string{{"config", "check", missing}, {"--config", missing, "config", "check"}} {
		_, err := exec(args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error (exit 2)", args, err)
		}
	}
}
