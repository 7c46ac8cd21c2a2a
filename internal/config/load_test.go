package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// TestLoadBad loads every file of testdata/bad and checks that the error
// wraps ErrInvalid and contains each line of the sibling .want file.
func TestLoadBad(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 14 {
		t.Fatalf("found %d bad files, want the whole corpus", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			wantFile := strings.TrimSuffix(file, ".yml") + ".want"
			raw, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("every bad file needs its .want file: %v", err)
			}
			var wants []string
			for _, l := range strings.Split(string(raw), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					wants = append(wants, l)
				}
			}
			if len(wants) == 0 {
				t.Fatalf("%s lists no expected message", wantFile)
			}

			c, err := Load(file)
			if err == nil {
				t.Fatalf("Load accepted the file: %+v", c)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if c != nil {
				t.Errorf("Load returned a config along with the error")
			}
			msg := err.Error()
			for _, w := range wants {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q; got:\n%s", w, msg)
				}
			}
			if !strings.Contains(msg, file) {
				t.Errorf("error does not name the file %s: %s", file, msg)
			}
		})
	}
}

// TestLoadBadReportsEachProblemOnce guards against a problem reported both
// by the decoder and by validation.
func TestLoadBadReportsEachProblemOnce(t *testing.T) {
	_, err := Load("testdata/bad/several_problems.yml")
	if err == nil {
		t.Fatal("want an error")
	}
	lines := strings.Split(err.Error(), "\n")[1:]
	if len(lines) != 10 {
		t.Errorf("got %d problems, want the 10 of the file:\n%s", len(lines), err)
	}
	// engines[0] is not a mapping; its missing name is a consequence, not
	// a second problem.
	if strings.Contains(err.Error(), "engines[0].name") {
		t.Errorf("a key that failed to decode also failed validation:\n%s", err)
	}
	// agent.rounds_per_cycle (agent.budget.rounds) failed to decode: no
	// validation message about it.
	if n := strings.Count(err.Error(), "agent.budget.rounds"); n != 1 {
		t.Errorf("agent.budget.rounds reported %d times:\n%s", n, err)
	}
}

func TestLoadGood(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d good files", len(files))
	}
	for _, file := range append(files, "../../docs/config.example.yml") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := Load(file)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Load returned a config that does not validate: %v", err)
			}
		})
	}
}

func TestLoadEmptyMeansDefaults(t *testing.T) {
	for _, file := range []string{"testdata/good/empty.yml", "testdata/good/comments_only.yml", "testdata/good/nulls.yml"} {
		c, err := Load(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Errorf("%s: got %+v, want the defaults %+v", file, c, Default())
		}
	}
}

func TestLoadFull(t *testing.T) {
	c, err := Load("testdata/good/full.yml")
	if err != nil {
		t.Fatal(err)
	}
	// full.yml sets every key to something other than its default: any
	// leaf still equal to the default was not decoded.
	def := reflect.ValueOf(*Default())
	got := reflect.ValueOf(*c)
	for _, p := range leafPaths(reflect.TypeFor[Config](), "") {
		if strings.HasPrefix(p.path, "engines") {
			continue
		}
		if reflect.DeepEqual(fieldAt(got, p.index).Interface(), fieldAt(def, p.index).Interface()) {
			t.Errorf("%s = %v is the default: full.yml must change every key", p.path, fieldAt(got, p.index))
		}
	}
	for i, e := range c.Engines[:1] {
		v := reflect.ValueOf(e)
		for j := range v.NumField() {
			if v.Field(j).IsZero() {
				t.Errorf("engines[%d].%s is empty: full.yml must set every engine key", i, v.Type().Field(j).Name)
			}
		}
	}
	// Spot checks of the decoded forms, "host" dropped and relative files
	// resolved against the file's directory.
	checks := []struct {
		name      string
		got, want any
	}{
		{"targets", c.Targets, []measure.Target{"volume", "container"}},
		{"workloads", c.Workloads, []measure.Workload{"randwrite", "fsync"}},
		{"interval", c.Agent.Interval, 15 * time.Minute},
		{"retention", c.Agent.Retention, 720 * time.Hour},
		{"churn_quiet_period", c.Agent.ChurnQuietPeriod, 2 * time.Minute},
		{"metrics_detail", c.Agent.MetricsDetail, true},
		{"daily_byte_budget", c.Agent.DailyByteBudget, 512 * MiB},
		{"min_free_bytes", c.FreeSpace.MinFreeBytes, 10 * GiB},
		{"max_io_pressure", c.Agent.MaxIOPressure, 20.5},
		{"api_token_file", c.Agent.APITokenFile, filepath.Join("testdata", "good", "token")},
		{"web_config_file", c.Agent.WebConfigFile, "/etc/layerprobe/web.yml"},
		{"engines", len(c.Engines), 3},
		{"engines[1].host", c.Engines[1].Host, "ssh://deploy@edge-2.example.com:2222"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestLoadAnchorsAndMerge(t *testing.T) {
	c, err := Load("testdata/good/anchors.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := []Engine{
		{Name: "a", ScratchDir: "/srv/scratch", ProbeImage: "layerprobe-probe:latest"},
		{Name: "b", ScratchDir: "/srv/scratch", ProbeImage: "layerprobe-probe:latest"},
	}
	if !reflect.DeepEqual(c.Engines, want) {
		t.Errorf("engines = %+v, want %+v", c.Engines, want)
	}
	if !reflect.DeepEqual(c.Targets, []measure.Target{"container", "bind"}) {
		t.Errorf("targets = %v", c.Targets)
	}
}

func TestLoadZeroValues(t *testing.T) {
	c, err := Load("testdata/good/zero_values.yml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.DailyByteBudget != 0 || c.Agent.ChurnQuietPeriod != 0 || c.FreeSpace.MinFreeBytes != 0 {
		t.Errorf("zeros not decoded: %+v", c)
	}
}

func TestLoadMissingFileIsNotInvalid(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yml"))
	if err == nil {
		t.Fatal("want an error for a missing file")
	}
	if errors.Is(err, ErrInvalid) {
		t.Errorf("a missing file is not an invalid config: %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error does not wrap fs.ErrNotExist: %v", err)
	}
}

func TestLoadDirectoryIsNotInvalid(t *testing.T) {
	_, err := Load(t.TempDir())
	if err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("Load(dir) = %v, want a read error", err)
	}
}

func TestLoadTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yml")
	data := []byte("# " + strings.Repeat("x", maxFileBytes) + "\n")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big) = %v, want ErrInvalid for size", err)
	}
}

// TestLoadOneLinePerProblem checks the shape callers print: a header line
// naming the file, then one line per problem, in file order.
func TestLoadOneLinePerProblem(t *testing.T) {
	_, err := Load("testdata/bad/listen_and_ranges.yml")
	if err == nil {
		t.Fatal("want an error")
	}
	lines := strings.Split(err.Error(), "\n")
	if !strings.HasSuffix(lines[0], "invalid configuration:") {
		t.Errorf("header = %q", lines[0])
	}
	last := 0
	for _, l := range lines[1:] {
		num, _, ok := strings.Cut(strings.TrimPrefix(l, "line "), ": ")
		n, err := strconv.Atoi(num)
		if !strings.HasPrefix(l, "line ") || !ok || err != nil {
			t.Fatalf("problem %q does not start with its line", l)
		}
		if n < last {
			t.Errorf("problems out of file order: line %d after line %d", n, last)
		}
		last = n
	}
}

// TestYAMLDecodesDurations records what yaml.v3 does with time.Duration,
// the reason config.go keeps time.Duration fields: it parses "1h" itself
// and refuses a bare integer. The decoder here still handles durations
// itself, for messages that name the key.
func TestYAMLDecodesDurations(t *testing.T) {
	var v struct {
		D time.Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 1h30m"), &v); err != nil || v.D != 90*time.Minute {
		t.Errorf("yaml.v3 decoded 1h30m as %v, %v", v.D, err)
	}
	if err := yaml.Unmarshal([]byte("d: 3600"), &v); err == nil {
		t.Errorf("yaml.v3 accepted a bare integer duration")
	}
}

func TestDurationForms(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"0", 0, true},
		{`"0s"`, 0, true},
		{"60", 0, false},
		{"1.5", 0, false},
		{"true", 0, false},
		{"1d", 0, false},
		{"[1h]", 0, false},
	}
	for _, tt := range tests {
		c, err := parse([]byte("agent:\n  churn_quiet_period: " + tt.in + "\n"))
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "agent.churn_quiet_period: want a duration") {
				t.Errorf("%s: message does not name the key: %v", tt.in, err)
			}
			continue
		}
		if c.Agent.ChurnQuietPeriod != tt.want {
			t.Errorf("%s = %v, want %v", tt.in, c.Agent.ChurnQuietPeriod, tt.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	valid := []string{"listen_address", "interval", "jitter", "state_dir", "retention"}
	tests := map[string]string{
		"intervl":       "interval",
		"listenAddress": "listen_address",
		"listen-addr":   "",
		"Jitter":        "jitter",
		"statedir":      "state_dir",
		"zzz":           "",
		"retentoin":     "retention",
	}
	for in, want := range tests {
		if got := suggest(in, valid); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"profil", "profile", 1}, {"ab", "ba", 2},
	}
	for _, tt := range tests {
		if got := levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestParseCapsProblems(t *testing.T) {
	var b strings.Builder
	for i := range 150 {
		fmt.Fprintf(&b, "unknown_%d: 1\n", i)
	}
	_, err := parse([]byte(b.String()))
	if err == nil {
		t.Fatal("want an error")
	}
	lines := strings.Split(err.Error(), "\n")
	if got := len(lines); got != 1+maxProblems+1 {
		t.Errorf("got %d lines, want header, %d problems and a summary", got, maxProblems)
	}
	if last := lines[len(lines)-1]; last != "... and 50 more problems" {
		t.Errorf("last line = %q", last)
	}
}

func TestParseShortensLongValues(t *testing.T) {
	_, err := parse([]byte("profile: " + strings.Repeat("x", 10000) + "\n" + strings.Repeat("k", 1000) + "y: 1\n"))
	if err == nil {
		t.Fatal("want an error")
	}
	if len(err.Error()) > 1000 {
		t.Errorf("message quotes whole values (%d bytes): %.300s", len(err.Error()), err)
	}
}

// TestParseHostileStructures: nesting, alias cycles and expansion bombs end
// in an error, not in a crash or a hang.
func TestParseHostileStructures(t *testing.T) {
	var laughs strings.Builder
	laughs.WriteString("x0: &a0 [container]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&laughs, "x%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	laughs.WriteString("targets: *a29\n")
	inputs := map[string]string{
		"sequence bomb": laughs.String(),
		"deep lists":    "targets: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
		"deep maps":     "agent: " + strings.Repeat("{a: ", 5000) + "1" + strings.Repeat("}", 5000),
		"alias cycle":   "engines: &e [*e]",
		"merge cycle":   "engines: &e [{<<: *e}]",
		"scalar root":   "hello",
		"binary":        "agent: {interval: !!binary aGVsbG8=}",
		"tagged map":    "agent: !!map {jitter: 0.1}",
	}
	for name, in := range inputs {
		done := make(chan error, 1)
		go func() {
			_, err := parse([]byte(in))
			done <- err
		}()
		select {
		case err := <-done:
			if name == "tagged map" {
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
				continue
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: parse did not return", name)
		}
	}
}

// TestAliases: a deprecated key alone sets its successor and is listed in
// Deprecated with its line; the new key alone is not listed; both together
// are an error naming both.
func TestAliases(t *testing.T) {
	for _, a := range Aliases {
		t.Run(a.Old, func(t *testing.T) {
			value := "3"
			if strings.HasSuffix(a.New, "precision") {
				value = "0.05"
			} else if strings.HasSuffix(a.New, "max_bytes") {
				value = "1GiB"
			} else if strings.HasSuffix(a.New, "max_duration") {
				value = "90s"
			}
			old, err := parse([]byte(nest(a.Old, value)))
			if err != nil {
				t.Fatalf("old key alone: %v", err)
			}
			cur, err := parse([]byte(nest(a.New, value)))
			if err != nil {
				t.Fatalf("new key alone: %v", err)
			}
			if len(cur.Deprecated) != 0 {
				t.Errorf("new key alone: deprecated %v", cur.Deprecated)
			}
			want := []Deprecation{{Line: strings.Count(a.Old, "."), Alias: a}}
			want[0].Line++
			if !reflect.DeepEqual(old.Deprecated, want) {
				t.Errorf("old key alone: deprecated %v, want %v", old.Deprecated, want)
			}
			old.Deprecated = nil
			if !reflect.DeepEqual(old, cur) {
				t.Errorf("old key alone decodes to\n%+v\nnew key alone to\n%+v", old, cur)
			}
			if reflect.DeepEqual(cur, Default()) {
				t.Errorf("%s: %s is its default, the test proves nothing", a.New, value)
			}
			both := nest(a.Old, value) + nest(a.New, value)
			if rest, ok := strings.CutPrefix(a.Old, "agent."); ok {
				// One agent mapping holding both.
				both = "agent:\n  " + strings.ReplaceAll(strings.TrimSuffix(
					nest(rest, value)+nest(strings.TrimPrefix(a.New, "agent."), value), "\n"), "\n", "\n  ") + "\n"
			}
			_, err = parse([]byte(both))
			if err == nil || !strings.Contains(err.Error(), a.Old) || !strings.Contains(err.Error(), a.New) {
				t.Errorf("both keys: %v, want an error naming %s and %s", err, a.Old, a.New)
			}
		})
	}
}

// nest spells a dotted key as YAML: agent.budget.rounds: 3.
func nest(path, value string) string {
	var b strings.Builder
	for i, k := range strings.Split(path, ".") {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(strings.Repeat("  ", i) + k + ":")
	}
	return b.String() + " " + value + "\n"
}

func TestDeprecationString(t *testing.T) {
	d := Deprecation{Line: 4, Alias: Alias{Old: "agent.target_precision", New: "agent.budget.precision"}}
	if got, want := d.String(), "line 4: agent.target_precision is deprecated, write agent.budget.precision (same meaning)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
