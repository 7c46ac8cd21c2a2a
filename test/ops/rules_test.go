package ops

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const rulesFile = "deploy/prometheus/layerprobe-rules.yml"

// rawRatioFile holds the optional raw ratios to the host, loaded beside
// rulesFile by whoever wants them; the conventions and unit tests cover it
// too.
const rawRatioFile = "deploy/prometheus/layerprobe-raw-ratio-rules.yml"

// assumedInterval is the agent's cycle interval the rules are written for
// (the default agent.interval); docs/runbook.md#assumptions-and-tuning.
const assumedInterval = 6 * time.Hour

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record        string            `yaml:"record"`
	Alert         string            `yaml:"alert"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

func loadRules(t testing.TB) []rule {
	t.Helper()
	var out []rule
	for _, name := range []string{rulesFile, rawRatioFile} {
		b, err := os.ReadFile(repoPath(name))
		if err != nil {
			t.Fatal(err)
		}
		var f ruleFile
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := len(out)
		for _, g := range f.Groups {
			out = append(out, g.Rules...)
		}
		if len(out) == n {
			t.Fatalf("%s has no rules", name)
		}
	}
	return out
}

func recordingRuleNames(t testing.TB) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Record != "" {
			out[r.Record] = true
		}
	}
	return out
}

// wantAlerts are the alerts the mixin ships, each in one rule.
var wantAlerts = []string{
	"LayerprobeFsyncRegression",     // fsync regression, from the detector's metric
	"LayerprobeFsyncOverheadHigh",   // fsync overhead above a configurable level
	"LayerprobeAgentStale",          // agent stale (also: gone)
	"LayerprobeAgentNeverSucceeded", // agent stale from the start
	"LayerprobeCyclesFailing",       // cycles failing
	"LayerprobeSlowStorageDriver",   // vfs, devicemapper, aufs
	"LayerprobeBudgetExhausted",     // budget exhausted
	// the host arm outside the probe container's CPU cgroups
	"LayerprobeHostArmOutsideCPUCgroup",
	// fsync in a fresh container at least twice the host's (cold probe)
	"LayerprobeColdFsyncOverheadHigh",
	// a database or queue with its data in the writable layer (advisor)
	"LayerprobeDatabaseInWritableLayer",
}

// stateAlerts read a fact the agent sets when its probe container starts,
// not a measurement of each cycle: waiting two cycles would add no
// evidence, only delay. `for: 1h` rides out scrape gaps and restarts.
var stateAlerts = map[string]time.Duration{
	"LayerprobeHostArmOutsideCPUCgroup": time.Hour,
}

// spanByExpression are alerts whose two-cycle span lies in the expression
// rather than in `for:`, with the number that must appear in it.
var spanByExpression = map[string]string{
	// time() - last success > 54000 s = 2.5 intervals: two missed cycles
	// plus jitter and a cycle's duration. `for:` only rides out scrapes.
	"LayerprobeAgentStale": "> 54000",
}

// coldAlerts read the cold probe's results. Cold cycles run every
// agent.cold_interval (12h) and each publication already summarises the
// recent cold rounds, so two cycles of `for:` would be a day's wait: the
// metric contract fixes `for: 1h` (the value persists across scrapes).
var coldAlerts = map[string]time.Duration{
	"LayerprobeColdFsyncOverheadHigh": time.Hour,
}

// TestPromtoolRules runs promtool's own checks: lint (duplicate rules and
// the like) made fatal, and the unit tests with firing and non-firing cases.
func TestPromtoolRules(t *testing.T) {
	promtool := tool(t, "promtool")
	queue.Parallel(t) // about 15 s of CPU: overlap it with the end-to-end tests
	if r := run(t, time.Minute, "", nil, promtool, "check", "rules", "--lint=all", "--lint-fatal", repoPath(rulesFile), repoPath(rawRatioFile)); r.err != nil {
		t.Errorf("promtool check rules:\n%s", r)
	} else if !strings.Contains(r.stdout, "SUCCESS") {
		t.Errorf("promtool check rules printed no SUCCESS:\n%s", r)
	}
	tests, err := filepath.Glob(repoPath("deploy/prometheus/tests/*.yml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule tests in deploy/prometheus/tests: %v", err)
	}
	args := append([]string{"test", "rules"}, tests...)
	// About 15 s of CPU for both files (the rules evaluated every 5m),
	// a minute when the other suites load both cores.
	// Its TSDB in TMPDIR, on a memory file system (memDir).
	env := []string{"TMPDIR=" + memDir(t)}
	if r := run(t, 10*time.Minute, repoPath("deploy/prometheus"), env, promtool, args...); r.err != nil {
		t.Errorf("promtool test rules:\n%s", r)
	}
}

type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromQLExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

// TestRulesConventions checks what promtool does not: every alert is
// there, has a severity, summary, description and a runbook link to an
// existing section of docs/runbook.md, waits at least two cycles, uses only
// documented metrics, and has firing and non-firing unit-test cases; every
// recording rule is unit-tested.
func TestRulesConventions(t *testing.T) {
	docs := documentedMetrics(t)
	recorded := recordingRuleNames(t)
	anchors := runbookAnchors(t)
	rules := loadRules(t)
	alerts := map[string]rule{}
	for _, r := range rules {
		if (r.Alert == "") == (r.Record == "") {
			t.Errorf("rule %+v: want exactly one of alert and record", r)
			continue
		}
		name := r.Alert + r.Record
		checkExpr(t, name, r.Expr, docs, recorded, false)
		if r.Record != "" {
			if !regexp.MustCompile(`^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$`).MatchString(r.Record) {
				t.Errorf("recording rule %s: want level:metric:operations", r.Record)
			}
			continue
		}
		alerts[r.Alert] = r
		checkModes(t, "alert "+r.Alert, r.Alert, r.Expr)
		if !regexp.MustCompile(`^Layerprobe[A-Z][A-Za-z]+$`).MatchString(r.Alert) {
			t.Errorf("alert %s: want CamelCase with the Layerprobe prefix", r.Alert)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("alert %s: severity %q", r.Alert, s)
		}
		for k, v := range r.Labels {
			if strings.Contains(v, "$value") || strings.Contains(v, "{{") {
				t.Errorf("alert %s: label %s is templated (%q): every change would make a new alert", r.Alert, k, v)
			}
		}
		sum, desc := r.Annotations["summary"], r.Annotations["description"]
		if sum == "" || !strings.HasSuffix(sum, ".") || strings.Contains(sum, "{{") {
			t.Errorf("alert %s: summary %q: want a static sentence", r.Alert, sum)
		}
		if !strings.Contains(desc, "{{ $labels.instance }}") || !strings.Contains(desc, "{{ $labels.engine }}") {
			t.Errorf("alert %s: description %q should name the instance and engine", r.Alert, desc)
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, "https://github.com/layerprobe/layerprobe/blob/main/docs/runbook.md#")
		if !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
			t.Errorf("alert %s: runbook_url %q: want docs/runbook.md#%s, a section of docs/runbook.md", r.Alert, url, strings.ToLower(r.Alert))
		}
		if !regexp.MustCompile(`[<>=]=?\s*[-\d(a-z]`).MatchString(r.Expr) {
			t.Errorf("alert %s: no comparison in %q: it would always fire", r.Alert, r.Expr)
		}
		forDur, err := time.ParseDuration(strings.ReplaceAll(r.For, "d", "h")) // no day units used
		if err != nil {
			t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			continue
		}
		if want, ok := stateAlerts[r.Alert]; ok {
			if forDur != want {
				t.Errorf("alert %s: for %s, want %s", r.Alert, r.For, want)
			}
		} else if want, ok := coldAlerts[r.Alert]; ok {
			if forDur != want {
				t.Errorf("alert %s: for %s, want %s", r.Alert, r.For, want)
			}
		} else if want, ok := spanByExpression[r.Alert]; ok {
			if !strings.Contains(r.Expr, want) || forDur <= 0 {
				t.Errorf("alert %s: want %q in the expression and a for: clause, have for %q and %q", r.Alert, want, r.For, r.Expr)
			}
		} else if forDur < 2*assumedInterval {
			t.Errorf("alert %s: for %s is shorter than two cycles (2 x %s)", r.Alert, r.For, assumedInterval)
		}
	}
	for _, a := range wantAlerts {
		if _, ok := alerts[a]; !ok {
			t.Errorf("alert %s missing from %s", a, rulesFile)
		}
	}
	if len(alerts) != len(wantAlerts) {
		t.Errorf("%d alerts in %s, want exactly %v (add new ones to wantAlerts)", len(alerts), rulesFile, wantAlerts)
	}

	// The unit tests cover every alert both ways and every recording rule.
	files, _ := filepath.Glob(repoPath("deploy/prometheus/tests/*.yml"))
	firing, quiet, exprs := map[string]int{}, map[string]int{}, map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf ruleTestFile
		if err := yaml.Unmarshal(b, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname]++
				} else {
					quiet[a.Alertname]++
				}
			}
			for _, e := range tc.PromQLExprTest {
				exprs[strings.TrimSpace(e.Expr)] = true
			}
		}
	}
	for a := range alerts {
		if firing[a] == 0 || quiet[a] == 0 {
			t.Errorf("alert %s: %d firing and %d non-firing test cases, want at least one of each", a, firing[a], quiet[a])
		}
	}
	for r := range recorded {
		if !exprs[r] {
			t.Errorf("recording rule %s has no promql_expr_test", r)
		}
	}
}

// runbookAnchors are the GitHub anchors of docs/runbook.md's headings.
func runbookAnchors(t testing.TB) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(repoPath("docs/runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			out[githubAnchor(h)] = true
		}
	}
	return out
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces to
// dashes, punctuation dropped.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestRunbookLinksResolve: links from the runbook to its own sections and
// to other docs point at something that exists.
func TestRunbookLinksResolve(t *testing.T) {
	b, err := os.ReadFile(repoPath("docs/runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := runbookAnchors(t)
	for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(string(b), -1) {
		link := m[1]
		if strings.HasPrefix(link, "http") {
			continue
		}
		file, anchor, _ := strings.Cut(link, "#")
		if file == "" {
			if !anchors[anchor] {
				t.Errorf("runbook link %s: no such section", link)
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(repoPath("docs"), filepath.FromSlash(file))); err != nil {
			t.Errorf("runbook link %s: %v", link, err)
		}
	}
}

// TestRulesReadLeanSeries: every recording rule and alert of the default
// rules file reads only series the agent exposes at its lean default, so
// they work at both levels. The raw ratios to the host (rawRatioFile)
// divide every raw figure: they need agent.metrics_detail: true, and the
// file says so.
func TestRulesReadLeanSeries(t *testing.T) {
	b, err := os.ReadFile(repoPath(rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			ps, err := scanPromQL(r.Expr)
			if err != nil {
				t.Fatalf("%s%s: %v", r.Record, r.Alert, err)
			}
			for _, s := range ps.selectors {
				n++
				if !leanSelector(s) {
					t.Errorf("%s%s reads %s, which the lean default does not expose whole (docs/metrics.md)", r.Record, r.Alert, s.name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no selectors in the rules")
	}
	raw, err := os.ReadFile(repoPath(rawRatioFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "agent.metrics_detail") {
		t.Errorf("%s divides every raw figure but does not say it needs agent.metrics_detail: true", rawRatioFile)
	}
}
