package config

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default() does not validate: %v", err)
	}
}

func TestDefaultIsFresh(t *testing.T) {
	a := Default()
	a.Targets[0] = "changed"
	if Default().Targets[0] == "changed" {
		t.Error("Default() shares its Targets slice between calls")
	}
}

// TestValidate changes one thing of Default at a time and checks the
// message names the key and the value; valid edge values must pass.
func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // substrings; nil means valid
	}{
		{"rounds 2", func(c *Config) { c.Budget.Rounds = 2 }, nil},
		{"rounds 1000", func(c *Config) { c.Budget.Rounds = 1000 }, nil},
		{"rounds 1", func(c *Config) { c.Budget.Rounds = 1 }, []string{"rounds: 1 is out of range"}},
		{"rounds 1001", func(c *Config) { c.Budget.Rounds = 1001 }, []string{"rounds: 1001"}},
		{"profile seed", func(c *Config) { c.Profile = "seed" }, nil},
		{"profile empty", func(c *Config) { c.Profile = "" }, []string{`profile: "" is not a built-in profile`}},
		{"targets with host", func(c *Config) { c.Targets = []measure.Target{"host", "bind"} }, nil},
		{"targets empty", func(c *Config) { c.Targets = nil }, []string{"targets: no target besides host"}},
		{"targets duplicate host", func(c *Config) { c.Targets = []measure.Target{"host", "bind", "host"} }, []string{`targets[2]: "host" is listed twice`}},
		{"engine ok", func(c *Config) {
			c.Engines = []Engine{{Name: "a-1_b", Host: "tcp://[::1]:2376", ScratchDir: "/srv/x", ProbeImage: "registry.local:5000/probe/fio@sha256:" + strings.Repeat("a", 64)}}
		}, nil},
		{"engine name 63", func(c *Config) { c.Engines = []Engine{{Name: strings.Repeat("a", 63)}} }, nil},
		{"engine name 64", func(c *Config) { c.Engines = []Engine{{Name: strings.Repeat("a", 64)}} }, []string{"engines[0].name:", "at most 63"}},
		{"engine name leading dash", func(c *Config) { c.Engines = []Engine{{Name: "-a"}} }, []string{`engines[0].name: "-a"`}},
		{"image id", func(c *Config) { c.Engines = []Engine{{Name: "a", ProbeImage: strings.Repeat("b", 64)}} }, nil},
		{"scratch dir dot-dot root", func(c *Config) { c.Engines = []Engine{{Name: "a", ScratchDir: "/tmp/.."}} }, []string{"engines[0].scratch_dir", "root directory"}},
		{"unix host relative", func(c *Config) { c.Engines = []Engine{{Name: "a", Host: "unix://docker.sock"}} }, []string{"engines[0].host"}},
		{"engine type", func(c *Config) { c.Engines = []Engine{{Name: "a", Type: "podman"}} }, []string{`engines[0].type: "podman"`, "docker", "containerd"}},
		{"namespace on docker", func(c *Config) { c.Engines = []Engine{{Name: "a", Namespace: "k8s.io"}} }, []string{"engines[0].namespace", "only with type: containerd"}},
		{"snapshotter on docker", func(c *Config) { c.Engines = []Engine{{Name: "a", Type: "docker", Snapshotter: "btrfs"}} }, []string{"engines[0].snapshotter", "only with type: containerd"}},
		{"containerd tcp host", func(c *Config) { c.Engines = []Engine{{Name: "a", Type: "containerd", Host: "tcp://10.0.0.1:2375"}} }, []string{"engines[0].host", "unix"}},
		{"containerd namespace", func(c *Config) { c.Engines = []Engine{{Name: "a", Type: "containerd", Namespace: "k8s..io"}} }, []string{`engines[0].namespace: "k8s..io"`}},
		{"containerd snapshotter", func(c *Config) { c.Engines = []Engine{{Name: "a", Type: "containerd", Snapshotter: "zfs"}} }, []string{`engines[0].snapshotter: "zfs"`, "overlayfs, native, btrfs, fuse-overlayfs"}},
		{"ssh host", func(c *Config) { c.Engines = []Engine{{Name: "a", Host: "ssh://me@host"}} }, nil},
		{"fio absolute", func(c *Config) { c.Fio.Binary = "/opt/fio/bin/fio" }, nil},
		{"fio empty", func(c *Config) { c.Fio.Binary = "" }, []string{"fio.binary: must be set"}},
		{"min free bytes negative", func(c *Config) { c.FreeSpace.MinFreeBytes = -1 }, []string{"free_space.min_free_bytes: -1B is negative"}},
		{"ratio 0.9", func(c *Config) { c.FreeSpace.MinFreeRatio = 0.9 }, nil},
		{"ratio NaN", func(c *Config) { c.FreeSpace.MinFreeRatio = math.NaN() }, []string{"free_space.min_free_ratio: NaN"}},
		{"interval 10s", func(c *Config) { c.Agent.Interval = 10 * time.Second }, nil},
		{"interval 9s", func(c *Config) { c.Agent.Interval = 9 * time.Second }, []string{"agent.interval: 9s is too short"}},
		{"retry backoff 500ms", func(c *Config) { c.Agent.RetryBackoff = 500 * time.Millisecond }, []string{"agent.retry_backoff: 500ms is too short, want 0 (wait the whole interval) or at least 1s"}},
		{"jitter 0.5", func(c *Config) { c.Agent.Jitter = 0.5 }, nil},
		{"jitter inf", func(c *Config) { c.Agent.Jitter = math.Inf(1) }, []string{"agent.jitter: +Inf"}},
		{"rounds per cycle 100", func(c *Config) { c.Agent.Budget.Rounds = 100 }, nil},
		{"rounds per cycle -1", func(c *Config) { c.Agent.Budget.Rounds = -1 }, []string{"agent.budget.rounds: -1"}},
		{"min rounds per cycle 0", func(c *Config) { c.Agent.Budget.MinRounds = 0 }, []string{"agent.budget.min_rounds: 0"}},
		{"target precision", func(c *Config) { c.Agent.Budget.Precision = 1.5 }, []string{"agent.budget.precision: 1.5"}},
		{"precision", func(c *Config) { c.Budget.Precision = -0.1 }, []string{"precision: -0.1"}},
		{"negative cycle budget", func(c *Config) { c.Agent.Budget.MaxBytes = -1 }, []string{"agent.budget.max_bytes"}},
		{"negative run budget", func(c *Config) { c.Budget.MaxBytes = -1 }, []string{"max_bytes"}},
		{"retention 1h", func(c *Config) { c.Agent.Retention = time.Hour }, nil},
		{"retention 59m", func(c *Config) { c.Agent.Retention = 59 * time.Minute }, []string{"agent.retention: 59m is too short"}},
		{"startup image 512KiB", func(c *Config) { c.Agent.StartupImages = []ByteSize{10 * MiB, 512 * 1024} },
			[]string{"agent.startup_images[1]: 512KiB is out of range, want 1MiB to 2GiB"}},
		{"startup image 3GiB", func(c *Config) { c.Agent.StartupImages = []ByteSize{3 * GiB} }, []string{"agent.startup_images[0]"}},
		{"listen ipv6", func(c *Config) { c.Agent.ListenAddress = "[::1]:9811" }, nil},
		{"listen empty", func(c *Config) { c.Agent.ListenAddress = "" }, []string{"agent.listen_address: \"\" is empty"}},
		{"listen port 0", func(c *Config) { c.Agent.ListenAddress = ":0" }, []string{"agent.listen_address", "port outside 1-65535"}},
		{"listen named port", func(c *Config) { c.Agent.ListenAddress = ":http" }, []string{"agent.listen_address"}},
		{"state dir relative", func(c *Config) { c.Agent.StateDir = "state" }, []string{"agent.state_dir: \"state\" is not an absolute path"}},
		{"state dir root", func(c *Config) { c.Agent.StateDir = "/" }, []string{"agent.state_dir", "root directory"}},
		{"budget negative", func(c *Config) { c.Agent.DailyByteBudget = -GiB }, []string{"agent.daily_byte_budget"}},
		{"first fill negative", func(c *Config) { c.Agent.FirstFill = FirstFill{MaxBytes: -MiB, MaxDuration: -time.Second} },
			[]string{"agent.first_fill.max_bytes:", "is negative, want 0 (no first fill) or a size such as 1.5GiB",
				"agent.first_fill.max_duration: -1s is negative, want 0 (no time cap) or a duration such as 5m"}},
		{"io pressure 100", func(c *Config) { c.Agent.MaxIOPressure = 100 }, nil},
		{"disk util 1", func(c *Config) { c.Agent.MaxDiskUtil = 1 }, nil},
		{"churn negative", func(c *Config) { c.Agent.ChurnQuietPeriod = -time.Second }, []string{"agent.churn_quiet_period: -1s is negative"}},
		{"metric latency", func(c *Config) { c.Detector.Metric = "latency_p99" }, nil},
		{"min baseline 3", func(c *Config) { c.Detector.MinBaselineRound = 3; c.Detector.BaselineRounds = 3 }, nil},
		{"baseline < min", func(c *Config) { c.Detector.BaselineRounds = 11 }, []string{"detector.baseline_rounds: 11 is less than min_baseline_rounds (12)"}},
		{"h negative", func(c *Config) { c.Detector.H = -1 }, []string{"detector.h: -1"}},
		{"clip inf", func(c *Config) { c.Detector.Clip = math.Inf(1) }, []string{"detector.clip: +Inf"}},
		{"k NaN", func(c *Config) { c.Detector.K = math.NaN() }, []string{"detector.k: NaN"}},
		{"confirm equal", func(c *Config) { c.Detector.ConfirmMin = 16 }, nil},
		{"confirm min 0", func(c *Config) { c.Detector.ConfirmMin = 0 }, []string{"detector.confirm_min: 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
}

// TestValidateReportsEverything breaks many keys at once; every one of
// them must be named.
func TestValidateReportsEverything(t *testing.T) {
	c := Default()
	c.Profile = "x"
	c.Budget.Rounds = -1
	c.Targets = []measure.Target{"tmpfs"}
	c.Engines = []Engine{{Name: "a"}, {Name: "a"}, {Name: "B"}}
	c.Agent.Jitter = 2
	c.Agent.StateDir = ""
	c.Detector.ConfirmRounds = 0
	err := c.Validate()
	if err == nil {
		t.Fatal("want an error")
	}
	for _, key := range []string{"profile:", "rounds:", "targets[0]:", "engines[1].name:", "engines[2].name:", "agent.jitter:", "agent.state_dir:", "detector.confirm_rounds:", "detector.confirm_min:"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}
	// errors.Join keeps the problems apart for callers that list them.
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Errorf("Validate error does not unwrap to several errors")
	}
}

func TestEffectiveEngines(t *testing.T) {
	c := Default()
	got := c.EffectiveEngines()
	if want := []Engine{{Name: DefaultEngineName}}; !reflect.DeepEqual(got, want) {
		t.Errorf("no engines: got %+v, want %+v", got, want)
	}
	c.Engines = []Engine{{Name: "a", Host: "unix:///a.sock"}, {Name: "b"}}
	got = c.EffectiveEngines()
	if !reflect.DeepEqual(got, c.Engines) {
		t.Errorf("got %+v, want the configured %+v", got, c.Engines)
	}
	got[0].Name = "changed"
	if c.Engines[0].Name != "a" {
		t.Error("EffectiveEngines returned the config's own slice")
	}
}

func TestFmtDuration(t *testing.T) {
	tests := map[time.Duration]string{
		time.Hour:                    "1h",
		90 * time.Minute:             "1h30m",
		2 * time.Minute:              "2m",
		time.Hour + time.Second:      "1h0m1s",
		10 * time.Second:             "10s",
		1500 * time.Millisecond:      "1.5s",
		2160 * time.Hour:             "2160h",
		-5 * time.Second:             "-5s",
		time.Hour + 30*time.Second:   "1h0m30s",
		3*time.Hour + 5*time.Minute:  "3h5m",
		3*time.Hour + 50*time.Minute: "3h50m",
	}
	for d, want := range tests {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestRoundFits: a budget must hold one round of the profile's costliest
// job on host and every target; 0 is no cap.
func TestRoundFits(t *testing.T) {
	c := Default()
	if err := c.RoundFits(c.Budget.MaxBytes); err != nil {
		t.Errorf("default run budget: %v", err)
	}
	if err := c.RoundFits(c.Agent.Budget.MaxBytes); err != nil {
		t.Errorf("default cycle budget: %v", err)
	}
	// quick's costliest round on 4 targets: 96 MiB, an fsync round
	// that lays out one of its files.
	if err := c.RoundFits(96 * MiB); err != nil {
		t.Errorf("96 MiB: %v", err)
	}
	if err := c.RoundFits(96*MiB - 1); err == nil || !strings.Contains(err.Error(), "96MiB") || !strings.Contains(err.Error(), "fsync") {
		t.Errorf("a byte short of quick's round: %v, want an error naming 96MiB and fsync", err)
	}
	c.Profile = "long"
	if err := c.RoundFits(0); err != nil {
		t.Errorf("long without a cap: %v", err)
	}
	err := c.RoundFits(c.Budget.MaxBytes)
	if err == nil || !strings.Contains(err.Error(), `profile "long"`) || !strings.Contains(err.Error(), "randwrite job on 4 targets: up to 65600MiB") {
		t.Errorf("long within 2.5 GiB: %v", err)
	}
	// Fewer targets, a smaller round.
	c.Targets = c.Targets[:1]
	if err := c.RoundFits(c.Budget.MaxBytes); err == nil || !strings.Contains(err.Error(), "on 2 targets: up to 32800MiB") {
		t.Errorf("long on host and one target: %v", err)
	}
	c.Profile = "no such"
	if err := c.RoundFits(1); err != nil {
		t.Errorf("an unknown profile is Validate's to report: %v", err)
	}
}
