package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/distribution/reference"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// Limits that Validate enforces; docs/configuration.md states them too.
const (
	maxRounds         = 1000
	minInterval       = 10 * time.Second
	minRetryBackoff   = time.Second
	minRetention      = time.Hour
	maxRoundsPerCycle = 100
	maxBaselineRounds = 100_000
	maxConfirmRounds  = 1000
	minBaselineRounds = 3
	maxMinFreeRatio   = 0.9
	maxJitter         = 0.5
	maxTopN           = 1000
	maxWalkEntries    = 10_000_000
	minWalkTime       = 10 * time.Millisecond
	maxWalkTime       = time.Minute
	maxPassTime       = 10 * time.Minute
)

// validTargets lists the targets a config may name besides "host", in the
// order the design lists them.
var validTargets = measure.Targets[1:]

// detectorMetrics lists the metrics the fsync regression detector can
// watch.
var detectorMetrics = []string{"fsync_p99", "latency_p99"}

var engineNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Validate reports every problem of c at once (errors.Join, wrapped in
// ErrInvalid), each prefixed with its location, e.g. "engines[1].name",
// and saying what is allowed. It returns nil for a valid config.
func (c *Config) Validate() error {
	if ps := c.check(); len(ps) > 0 {
		return joinProblems(ps, nil)
	}
	return nil
}

// checker collects problems; every helper below is NaN-safe (a NaN fails
// every range), because YAML can spell NaN and infinity (.nan, .inf).
type checker struct {
	ps []problem
}

func (ch *checker) addf(path, format string, args ...any) {
	ch.ps = append(ch.ps, problem{path: path, msg: fmt.Sprintf(format, args...)})
}

func (ch *checker) addRelatedf(path string, related []string, format string, args ...any) {
	ch.ps = append(ch.ps, problem{path: path, related: related, msg: fmt.Sprintf(format, args...)})
}

func (ch *checker) floatRange(path string, v, lo, hi float64) {
	if !(v >= lo && v <= hi) {
		ch.addf(path, "%v is out of range, want %v to %v", v, lo, hi)
	}
}

// floatMin checks v >= lo (or v > lo when strict) and finite.
func (ch *checker) floatMin(path string, v, lo float64, strict bool) {
	ok := v >= lo
	want := fmt.Sprintf("at least %v", lo)
	if strict {
		ok = v > lo
		want = fmt.Sprintf("more than %v", lo)
	}
	if !ok || math.IsInf(v, 0) {
		ch.addf(path, "%v is out of range, want a finite number %s", v, want)
	}
}

func (ch *checker) intRange(path string, v, lo, hi int) {
	if v < lo || v > hi {
		ch.addf(path, "%d is out of range, want %d to %d", v, lo, hi)
	}
}

func (c *Config) check() []problem {
	ch := &checker{}

	if !slices.Contains(fio.ProfileNames(), c.Profile) {
		ch.addf("profile", "%q is not a built-in profile, want one of %s", short(c.Profile), strings.Join(fio.ProfileNames(), ", "))
	}
	c.Budget.check(ch, "budget", runBudgetLimits)
	c.checkTargets(ch)
	c.checkWorkloads(ch)
	c.checkEngines(ch)

	switch b := c.Fio.Binary; {
	case b == "":
		ch.addf("fio.binary", "must be set, want a command name looked up in PATH or an absolute path")
	case strings.IndexFunc(b, unicode.IsSpace) >= 0 || strings.ContainsRune(b, 0):
		ch.addf("fio.binary", "%q contains whitespace, want a command name or an absolute path", short(b))
	case strings.Contains(b, "/") && !filepath.IsAbs(b):
		ch.addf("fio.binary", "%q is a relative path, want a command name looked up in PATH or an absolute path", short(b))
	}

	if c.FreeSpace.MinFreeBytes < 0 {
		ch.addf("free_space.min_free_bytes", "%s is negative, want 0 or more", c.FreeSpace.MinFreeBytes)
	}
	ch.floatRange("free_space.min_free_ratio", c.FreeSpace.MinFreeRatio, 0, maxMinFreeRatio)

	c.checkAgent(ch)
	c.checkDetector(ch)
	c.checkAdvisor(ch)
	return ch.ps
}

func (c *Config) checkTargets(ch *checker) {
	measured, invalid := 0, 0
	names := joinTargets(validTargets)
	eachOnce(ch, "targets", c.Targets, func(at string, t measure.Target) {
		switch {
		case t == measure.TargetHost:
			// Always measured: every overhead is relative to it.
		case slices.Contains(validTargets, t):
			measured++
		default:
			invalid++
			ch.addf(at, "%q is not a target, want one of %s (host is always measured)", short(string(t)), names)
		}
	})
	if measured == 0 && invalid == 0 {
		ch.addf("targets", "no target besides host, want at least one of %s: overheads are relative to host", names)
	}
}

// checkWorkloads: each listed workload once, and each one the profile has
// (an unknown profile is reported on its own).
func (c *Config) checkWorkloads(ch *checker) {
	p, err := fio.LookupProfile(c.Profile)
	if err != nil {
		return
	}
	eachOnce(ch, "workloads", c.Workloads, func(at string, w measure.Workload) {
		if _, err := p.Only([]measure.Workload{w}); err != nil {
			ch.addf(at, "%q is not a workload of profile %q, want one of %s", short(string(w)), p.Name, strings.Join(p.WorkloadNames(), ", "))
		}
	})
}

// eachOnce calls check with "field[i]" for each entry of list the first
// time it appears, and reports every later appearance as listed twice.
func eachOnce[T ~string](ch *checker, field string, list []T, check func(at string, v T)) {
	seen := map[T]int{}
	for i, v := range list {
		at := fmt.Sprintf("%s[%d]", field, i)
		if first, dup := seen[v]; dup {
			ch.addf(at, "%q is listed twice (first as %s[%d])", short(string(v)), field, first)
			continue
		}
		seen[v] = i
		check(at, v)
	}
}

// ResolveProfile is the configured built-in profile with the configured
// workloads alone: what `run` and the agent measure, resolved in one
// place.
func (c *Config) ResolveProfile() (fio.Profile, error) {
	p, err := fio.LookupProfile(c.Profile)
	if err != nil {
		return fio.Profile{}, err
	}
	return p.Only(c.Workloads)
}

// ColdProfile is the configured built-in profile's fsync job alone: what
// a cold round runs in each fresh container and on the host, whatever
// workloads lists. workloads selects the steady measurement's jobs; a cold
// cycle has one job, and without it every cold cycle would fail.
func (c *Config) ColdProfile() (fio.Profile, error) {
	p, err := fio.LookupProfile(c.Profile)
	if err != nil {
		return fio.Profile{}, err
	}
	return p.Only([]measure.Workload{measure.Fsync})
}

func joinTargets(ts []measure.Target) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

func (c *Config) checkEngines(ch *checker) {
	names := map[string]int{}
	for i, e := range c.Engines {
		at := fmt.Sprintf("engines[%d]", i)
		switch {
		case e.Name == "":
			ch.addf(at+".name", "must be set, want lowercase letters, digits, '-' and '_', at most 63 characters")
		case !engineNameRE.MatchString(e.Name):
			ch.addf(at+".name", "%q is not a valid engine name, want lowercase letters, digits, '-' and '_', starting with a letter or digit, at most 63 characters", short(e.Name))
		default:
			if first, dup := names[e.Name]; dup {
				ch.addf(at+".name", "%q is already the name of engines[%d], want unique names (they are the engine label of every metric)", short(e.Name), first)
			} else {
				names[e.Name] = i
			}
		}
		switch e.Type {
		case "", EngineDocker:
			if msg := checkHost(e.Host); msg != "" {
				ch.addf(at+".host", "%q %s, want empty (DOCKER_HOST or the default socket), unix:///absolute/path, tcp://host:port or ssh://[user@]host[:port]", short(e.Host), msg)
			}
			if e.Namespace != "" {
				ch.addf(at+".namespace", "%q is set on a docker engine, want it only with type: containerd", short(e.Namespace))
			}
			if e.Snapshotter != "" {
				ch.addf(at+".snapshotter", "%q is set on a docker engine, want it only with type: containerd (a Docker engine's storage driver is the daemon's)", short(e.Snapshotter))
			}
		case EngineContainerd:
			if msg := checkContainerdHost(e.Host); msg != "" {
				ch.addf(at+".host", "%q %s, want empty (/run/containerd/containerd.sock) or unix:///absolute/path of containerd's socket", short(e.Host), msg)
			}
			if e.Namespace != "" && (len(e.Namespace) > 76 || !containerdNameRE.MatchString(e.Namespace)) {
				ch.addf(at+".namespace", "%q is not a containerd namespace, want letters and digits separated by single '.', '_' or '-', at most 76 characters (empty: k8s.io)", short(e.Namespace))
			}
			if e.Snapshotter != "" && !slices.Contains(Snapshotters, e.Snapshotter) {
				ch.addf(at+".snapshotter", "%q is not a snapshotter layerprobe measures, want one of %s (empty: overlayfs)", short(e.Snapshotter), strings.Join(Snapshotters, ", "))
			}
		default:
			ch.addf(at+".type", "%q is not an engine type, want docker (the default) or containerd", short(e.Type))
		}
		if d := e.ScratchDir; d != "" {
			switch {
			case !filepath.IsAbs(d):
				ch.addf(at+".scratch_dir", "%q is not an absolute path, want empty (<data root>/layerprobe-scratch) or an absolute directory", short(d))
			case filepath.Clean(d) == "/":
				ch.addf(at+".scratch_dir", "%q is the root directory, want a directory layerprobe owns: it removes what it leaves there", short(d))
			}
		}
		switch e.Topology {
		case "", "host":
		case "vm":
			if e.IsContainerd() {
				ch.addf(at+".topology", "%q is set on a containerd engine, want it only on a docker engine (containerd's socket is not forwarded out of a VM)", e.Topology)
			}
		default:
			ch.addf(at+".topology", "%q is not a topology, want empty (detect), host or vm", short(e.Topology))
		}
		if img := e.ProbeImage; img != "" {
			if msg := checkImage(img); msg != "" {
				ch.addf(at+".probe_image", "%q %s, want empty (build one from the host's fio) or the reference of a local image such as \"layerprobe-probe:latest\"", short(img), msg)
			}
		}
	}
}

// containerdNameRE is containerd's rule for identifiers, namespaces
// included.
var containerdNameRE = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

// checkContainerdHost returns what is wrong with containerd's address, or "".
func checkContainerdHost(h string) string {
	if h == "" {
		return ""
	}
	u, err := url.Parse(h)
	switch {
	case err != nil:
		return "is not a URL"
	case u.Scheme != "unix":
		return "is not a unix:// URL (containerd listens on a unix socket)"
	case u.Host != "" || !strings.HasPrefix(u.Path, "/"):
		return "is not a unix socket URL with an absolute path (note the three slashes)"
	}
	return ""
}

// checkHost returns what is wrong with a Docker endpoint, or "".
func checkHost(h string) string {
	if h == "" {
		return ""
	}
	u, err := url.Parse(h)
	if err != nil {
		return "is not a URL"
	}
	switch u.Scheme {
	case "unix":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return "is not a unix socket URL with an absolute path (note the three slashes)"
		}
	case "tcp", "ssh":
		if u.Host == "" || u.Hostname() == "" {
			return "has no host"
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return "has an invalid port"
			}
		}
		if u.Scheme == "tcp" && u.User != nil {
			return "has user information, which tcp:// does not take"
		}
	case "":
		return "has no scheme"
	default:
		return fmt.Sprintf("has the unsupported scheme %q", short(u.Scheme))
	}
	return ""
}

// checkImage returns what is wrong with an image reference, or "". The
// reference grammar is Docker's own, so what passes here the daemon
// parses too.
func checkImage(img string) string {
	switch {
	case strings.IndexFunc(img, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return "contains whitespace"
	case strings.HasPrefix(img, "-"):
		return "starts with '-'"
	}
	if _, err := reference.ParseAnyReference(img); err != nil {
		return "is not a valid image reference (" + short(err.Error()) + ")"
	}
	return ""
}

func (c *Config) checkAgent(ch *checker) {
	a := c.Agent
	if msg := checkListen(a.ListenAddress); msg != "" {
		ch.addf("agent.listen_address", "%q %s, want host:port such as \":9811\" or \"127.0.0.1:9811\"", short(a.ListenAddress), msg)
	}
	if !filepath.IsAbs(a.StateDir) {
		ch.addf("agent.state_dir", "%q is not an absolute path, want an absolute directory", short(a.StateDir))
	} else if filepath.Clean(a.StateDir) == "/" {
		ch.addf("agent.state_dir", "%q is the root directory, want a directory layerprobe owns", short(a.StateDir))
	}
	if a.Interval < minInterval {
		ch.addf("agent.interval", "%s is too short, want at least %s (production: 15m or more)", fmtDuration(a.Interval), fmtDuration(minInterval))
	}
	ch.floatRange("agent.jitter", a.Jitter, 0, maxJitter)
	if a.RetryBackoff != 0 && a.RetryBackoff < minRetryBackoff {
		ch.addf("agent.retry_backoff", "%s is too short, want 0 (wait the whole interval) or at least %s", fmtDuration(a.RetryBackoff), fmtDuration(minRetryBackoff))
	}
	a.Budget.check(ch, "agent.budget", cycleBudgetLimits)
	c.checkFirstFill(ch)
	if a.ColdInterval != 0 && a.ColdInterval < minInterval {
		ch.addf("agent.cold_interval", "%s is too short, want 0 (no cold probe) or at least %s (production: hours)", fmtDuration(a.ColdInterval), fmtDuration(minInterval))
	}
	ch.intRange("agent.cold_rounds", a.ColdRounds, 1, maxRoundsPerCycle)
	for i, b := range a.StartupImages {
		if b < MiB || b > 2*GiB {
			ch.addf(fmt.Sprintf("agent.startup_images[%d]", i), "%s is out of range, want 1MiB to 2GiB", b)
		}
	}
	ch.intRange("agent.window_rounds", a.WindowRounds, 2, 10000)
	ch.intRange("agent.cold_window_rounds", a.ColdWindowRounds, 2, 10000)
	if a.Retention < minRetention {
		ch.addf("agent.retention", "%s is too short, want at least %s", fmtDuration(a.Retention), fmtDuration(minRetention))
	}
	if a.DailyByteBudget < 0 {
		ch.addf("agent.daily_byte_budget", "%s is negative, want 0 (unlimited) or more", a.DailyByteBudget)
	}
	ch.floatRange("agent.max_io_pressure", a.MaxIOPressure, 0, 100)
	ch.floatRange("agent.max_disk_util", a.MaxDiskUtil, 0, 1)
	if a.ChurnQuietPeriod < 0 {
		ch.addf("agent.churn_quiet_period", "%s is negative, want 0 (no churn check) or more", fmtDuration(a.ChurnQuietPeriod))
	}
}

// checkFirstFill validates agent.first_fill. A ceiling below the cycle
// budget's is no error: the larger of the two applies (probe.Plan.Fill),
// so a configuration with a large agent.budget stays valid; the daily byte
// budget bounds the fill at run time.
func (c *Config) checkFirstFill(ch *checker) {
	f := c.Agent.FirstFill
	if f.MaxBytes < 0 {
		ch.addf("agent.first_fill.max_bytes", "%s is negative, want 0 (no first fill) or a size such as 1.5GiB", f.MaxBytes)
	}
	if f.MaxDuration < 0 {
		ch.addf("agent.first_fill.max_duration", "%s is negative, want 0 (no time cap) or a duration such as 5m", fmtDuration(f.MaxDuration))
	}
}

// budgetLimits are the rounds a budget may fix: a run's rounds alone make
// its intervals, so it needs two; a cycle's join the window's.
type budgetLimits struct {
	minRounds, maxRounds, minMinRounds   int
	roundsZero, roundsWhy, minRoundsZero string
}

var (
	runBudgetLimits = budgetLimits{minRounds: 2, maxRounds: maxRounds, minMinRounds: 0, roundsZero: "the profile's default",
		roundsWhy: ": one round gives no confidence interval", minRoundsZero: "0 (the profile's minimum) or "}
	cycleBudgetLimits = budgetLimits{minRounds: 1, maxRounds: maxRoundsPerCycle, minMinRounds: 1, roundsZero: "adaptive"}
)

// check validates a budget whose keys are under prefix.
func (b Budget) check(ch *checker, prefix string, l budgetLimits) {
	if b.Rounds != 0 && (b.Rounds < l.minRounds || b.Rounds > l.maxRounds) {
		ch.addf(prefix+".rounds", "%d is out of range, want 0 (%s) or %d to %d%s", b.Rounds, l.roundsZero, l.minRounds, l.maxRounds, l.roundsWhy)
	}
	if b.MinRounds != 0 || l.minMinRounds > 0 {
		if b.MinRounds < max(l.minMinRounds, 1) || b.MinRounds > l.maxRounds {
			ch.addf(prefix+".min_rounds", "%d is out of range, want %s%d to %d", b.MinRounds, l.minRoundsZero, max(l.minMinRounds, 1), l.maxRounds)
		}
	}
	ch.floatRange(prefix+".precision", b.Precision, 0, 1)
	if b.MaxBytes < 0 {
		ch.addf(prefix+".max_bytes", "%s is negative, want 0 (no cap) or more", b.MaxBytes)
	}
	if b.MaxDuration < 0 {
		ch.addf(prefix+".max_duration", "%s is negative, want 0 (no cap) or more", fmtDuration(b.MaxDuration))
	}
	if b.SideEvery < 0 || b.SideEvery > maxSideEvery {
		ch.addf(prefix+".side_every", "%d is out of range, want 0 or 1 (every target every round) to %d", b.SideEvery, maxSideEvery)
	}
}

// maxSideEvery bounds Budget.SideEvery: beyond it bind and volume would
// hardly run after their minimum rounds.
const maxSideEvery = 20

// checkListen returns what is wrong with a listen address, or "".
func checkListen(addr string) string {
	if addr == "" {
		return "is empty"
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "is not host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has a port outside 1-65535"
	}
	return ""
}

func (c *Config) checkDetector(ch *checker) {
	d := c.Detector
	if !slices.Contains(detectorMetrics, d.Metric) {
		ch.addf("detector.metric", "%q is not a detector metric, want one of %s", short(d.Metric), strings.Join(detectorMetrics, ", "))
	}
	ch.floatMin("detector.k", d.K, 0, false)
	ch.floatMin("detector.h", d.H, 0, true)
	ch.floatMin("detector.clip", d.Clip, 0, true)
	ch.floatMin("detector.min_effect", d.MinEffect, 0, false)

	if d.MinBaselineRound < minBaselineRounds {
		ch.addf("detector.min_baseline_rounds", "%d is too small, want at least %d", d.MinBaselineRound, minBaselineRounds)
	}
	if d.BaselineRounds > maxBaselineRounds {
		ch.addf("detector.baseline_rounds", "%d is too large, want at most %d", d.BaselineRounds, maxBaselineRounds)
	} else if d.BaselineRounds < d.MinBaselineRound {
		ch.addRelatedf("detector.baseline_rounds", []string{"detector.min_baseline_rounds"},
			"%d is less than min_baseline_rounds (%d), want baseline_rounds >= min_baseline_rounds", d.BaselineRounds, d.MinBaselineRound)
	}
	ch.intRange("detector.confirm_rounds", d.ConfirmRounds, 1, maxConfirmRounds)
	if d.ConfirmMin < 1 || d.ConfirmMin > max(d.ConfirmRounds, 1) {
		ch.addRelatedf("detector.confirm_min", []string{"detector.confirm_rounds"},
			"%d is out of range, want 1 to confirm_rounds (%d)", d.ConfirmMin, d.ConfirmRounds)
	}
}

func (c *Config) checkAdvisor(ch *checker) {
	a := c.Advisor
	ch.intRange("advisor.metrics_top_n", a.MetricsTopN, 0, maxTopN)
	if a.MinLayerBytes < 0 {
		ch.addf("advisor.min_layer_bytes", "%s is negative, want 0 or more", a.MinLayerBytes)
	}
	ch.intRange("advisor.walk_max_entries", a.WalkMaxEntries, 1, maxWalkEntries)
	if a.WalkMaxTime < minWalkTime || a.WalkMaxTime > maxWalkTime {
		ch.addf("advisor.walk_max_time", "%s is out of range, want %s to %s", fmtDuration(a.WalkMaxTime), fmtDuration(minWalkTime), fmtDuration(maxWalkTime))
	}
	switch {
	case a.PassMaxTime > maxPassTime:
		ch.addf("advisor.pass_max_time", "%s is too long, want at most %s", fmtDuration(a.PassMaxTime), fmtDuration(maxPassTime))
	case a.PassMaxTime < a.WalkMaxTime:
		ch.addRelatedf("advisor.pass_max_time", []string{"advisor.walk_max_time"},
			"%s is less than walk_max_time (%s), want pass_max_time >= walk_max_time", fmtDuration(a.PassMaxTime), fmtDuration(a.WalkMaxTime))
	}
}

// fmtDuration prints "1h" rather than time.Duration's "1h0m0s".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// RoundFits says whether a byte budget (budget.max_bytes for `run`,
// agent.budget.max_bytes for a cycle) can hold one round of the profile's
// costliest job on every configured target and host, at its byte caps
// and with its files. The probe starts a job's first round only when its
// caps on every target fit, and later rounds run with caps lowered to what
// is left, so a smaller budget leaves that job without the rounds an
// interval needs: say so up front instead.
// nil when it fits, when there is no cap, or when the profile is unknown
// (Validate reports that).
func (c *Config) RoundFits(budget ByteSize) error {
	p, err := c.ResolveProfile()
	if budget <= 0 || err != nil {
		return nil
	}
	targets := len(c.Targets) + 1
	need, w := p.MaxRoundBytes(targets)
	if int64(budget) >= need {
		return nil
	}
	return fmt.Errorf("%s is less than one round of profile %q can write (its %s job on %d targets: up to %s), "+
		"too little for that job's rounds; want 0 (no cap) or at least that",
		budget, p.Name, w, targets, atLeast(need))
}

// atLeast spells n so that it parses back to n or more: the human form
// when it is exact, whole MiB rounded up otherwise (64.06GiB would parse
// to less than 64 GiB and 64 MiB).
func atLeast(n int64) string {
	s := ByteSize(n).String()
	if b, err := ParseByteSize(s); err == nil && int64(b) >= n {
		return s
	}
	return fmt.Sprintf("%dMiB", (n+int64(MiB)-1)/int64(MiB))
}
