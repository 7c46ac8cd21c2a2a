package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/testsupport/fleetgen"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/layerprobe/layerprobe/internal/testsupport/thanosbed"
)

// thanosInterval is the scrape and rule evaluation interval of
// TestFleetThanos: the shipped groups' intervals (5m, 1h) are shortened
// to it on both sides, so that every group evaluates several times within
// the test.
const thanosInterval = 10 * time.Second

// thanosReplicas are the replicas of the HA pair of Prometheus servers
// with a Thanos sidecar: their external label replica, which Thanos Query
// deduplicates along.
var thanosReplicas = []string{"a", "b"}

// TestFleetThanos: the shipped rules, alerts and fleet dashboard on a
// distributed store, Thanos (scripts/install-deps.sh builds the thanos
// binary), set up as users run it: an HA pair of Prometheus servers
// (external label replica a and b) with a Thanos sidecar each, which
// uploads their blocks to a bucket (type FILESYSTEM); a store gateway on
// that bucket; Thanos Query over the sidecars, the store gateway and the
// ruler, deduplicating along replica and rule_replica; and a Thanos ruler
// that evaluates the shipped rule files (layerprobe-rules.yml, alerts
// included, and layerprobe-raw-ratio-rules.yml) through Thanos Query and
// keeps what it records in its own TSDB, which Thanos Query reads as a
// store (the dashboards read the recorded series there).
//
// The data: 14 hours of history of 24 agents made from a real agent's
// recorded output (internal/testsupport/fleetgen), backfilled with
// promtool into every Prometheus (blocks, which the sidecars upload and
// the store gateway serves), then scraped live from the same generated
// fleet (head data, which the sidecars serve). A plain Prometheus backfilled
// with the same blocks, scraping the same fleet and running the same rule
// files is the reference.
//
// Every recording rule and alert evaluates in the ruler without error; the
// store gateway alone answers the history as the plain Prometheus does; and
// every query of the fleet dashboard gives, through Thanos Query, the same
// series with the same values as on the plain Prometheus, at the same
// instant (instant queries) or the same steps (range queries over a day).
// The fleet is drawn so that no host joins, leaves, restarts or ends a
// cycle near the test's run, when the two sides scrape and evaluate at
// their own instants: the values they see are then the same. About 2-3
// minutes.
func TestFleetThanos(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs Prometheus and Thanos")
	}
	promtool, prom := tool(t, "promtool"), tool(t, "prometheus")
	thanos := tool(t, filepath.Base(thanosbed.Bin), filepath.Dir(thanosbed.Bin))
	queue.Parallel(t)
	ctx := t.Context()
	started := time.Now()

	rec := loadFleetRecording(t)
	step := 5 * time.Minute
	now := time.Now().Truncate(time.Second)
	cfg := quietFleet(t, fleetgen.Config{Hosts: 24, Start: now.Add(-14 * time.Hour), End: now.Add(time.Hour),
		Step: step, Cycle: 6 * time.Hour, Clusters: []string{"eu", "us"}}, now)
	hosts := fleetgen.Fleet(cfg)

	// The rule files as shipped, every group at thanosInterval, in one
	// file (the ruler and Prometheus load the same).
	dir := memDir(t)
	rulePath := filepath.Join(dir, "rules.yml")
	ruleText := shortenedRules(t, thanosInterval)
	if err := os.WriteFile(rulePath, ruleText, 0o644); err != nil {
		t.Fatal(err)
	}
	noRules := filepath.Join(dir, "no-rules.yml")
	if err := os.WriteFile(noRules, []byte("groups: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The history, backfilled once and copied: into the plain Prometheus
	// as it is, into each replica under blocks IDs of its own (two
	// backfills would give the same data under new IDs; the bucket keys
	// blocks by ID).
	hist := cfg
	hist.End = now
	histDir := filepath.Join(dir, "history")
	om := filepath.Join(dir, "fleet.om")
	out, err := os.Create(om)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := fleetgen.WriteOpenMetrics(out, rec, hosts, hist)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	histBed := &fleetgen.Bed{Promtool: promtool, Dir: histDir}
	// Day blocks: promtool reads the whole file once per block, and the
	// sidecar uploads blocks of any length that Prometheus has not
	// compacted.
	if err := histBed.BackfillOpenMetrics(ctx, om, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	os.Remove(om)
	blocks := blockDirs(t, histBed.Data())
	if len(blocks) == 0 {
		t.Fatal("no block from 14h of history")
	}
	backfilled := time.Now()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: fleetgen.Handler(rec, hosts, cfg, time.Now)}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	scrapes := fleetgen.ScrapeConfigs(l.Addr().String(), hosts, thanosInterval, true)

	plain := &fleetgen.Bed{Prometheus: prom, Promtool: promtool, Dir: filepath.Join(dir, "plain"), Rules: rulePath, Interval: thanosInterval}
	copyBlocks(t, blocks, plain.Data(), false)
	if err := plain.Start(ctx, scrapes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Stop)

	bucket := filepath.Join(dir, "bucket.yml")
	if err := os.WriteFile(bucket, []byte(thanosbed.BucketConfig(filepath.Join(dir, "bucket"))), 0o644); err != nil {
		t.Fatal(err)
	}
	var endpoints []string
	for _, replica := range thanosReplicas {
		// Compaction off (min = max block duration), as the sidecar
		// requires: it uploads the blocks as Prometheus cuts them.
		p := &fleetgen.Bed{Prometheus: prom, Promtool: promtool, Dir: filepath.Join(dir, "prometheus-"+replica), Rules: noRules,
			Interval: thanosInterval, ExternalLabels: map[string]string{"replica": replica},
			Flags: []string{"--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h"}}
		copyBlocks(t, blocks, p.Data(), true)
		if err := p.Start(ctx, scrapes); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		sidecar := startThanos(t, thanos, dir, "sidecar-"+replica, "sidecar",
			"--tsdb.path="+p.Data(), "--prometheus.url="+p.URL(), "--objstore.config-file="+bucket)
		endpoints = append(endpoints, sidecar.GRPC)
	}
	store := startThanos(t, thanos, dir, "store", "store", "--data-dir="+filepath.Join(dir, "store"),
		"--objstore.config-file="+bucket, "--sync-block-duration=5s")
	// The ruler's gRPC address is known before it starts: Thanos Query
	// reads what the ruler records, and the ruler queries Thanos Query.
	rulerGRPC, err := thanosbed.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	replicaLabels := []string{"--query.replica-label=replica", "--query.replica-label=rule_replica"}
	query := startThanos(t, thanos, dir, "query", "query",
		append(replicaLabels, "--endpoint.sd-config="+thanosbed.EndpointConfig(append(endpoints, store.GRPC, rulerGRPC)...))...)
	// Thanos Query over the store gateway alone: what the bucket serves.
	storeOnly := startThanos(t, thanos, dir, "query-store", "query",
		append(replicaLabels, "--endpoint.sd-config="+thanosbed.EndpointConfig(store.GRPC))...)
	// The ruler starts once Thanos Query reads every Prometheus and the
	// bucket: it would otherwise record figures of part of the data, which
	// the rules that take a maximum over a day keep.
	waitEndpoints(t, query, map[string]int{"sidecar": len(thanosReplicas), "store": 1})
	t.Logf("%d samples of %d hosts backfilled into %d blocks in %s; Prometheus and Thanos started in %s",
		samples, len(hosts), len(blocks), backfilled.Sub(started).Round(time.Second), time.Since(backfilled).Round(time.Second))

	thanosParams := url.Values{"dedup": {"true"}, "partial_response": {"false"}}

	t.Run("the store gateway serves the uploaded history", func(t *testing.T) {
		// In the oldest block, the newest, and one between.
		var instants []time.Time
		for _, back := range []time.Duration{13*time.Hour + 50*time.Minute, 7 * time.Hour, 20 * time.Minute} {
			instants = append(instants, now.Add(-back).Add(-step/2))
		}
		exprs := []string{`count by (cluster, job) (layerprobe_build_info)`, `count by (release) (node_uname_info)`,
			`sum by (cluster, driver, metric) (layerprobe_overhead_ratio{target="container", mode="steady"})`}
		testharness.Eventually(t, 2*time.Minute, 2*time.Second, "Thanos Query over the store gateway answers as the plain Prometheus", func() (bool, string) {
			for _, ts := range instants {
				for _, expr := range exprs {
					want, _, err := plain.Query(ctx, expr, time.Time{}, ts, 0)
					if err != nil {
						t.Fatal(err)
					}
					got, _, err := fleetgen.Query(ctx, storeOnly.URL(), thanosParams, expr, time.Time{}, ts, 0)
					if err != nil {
						return false, err.Error()
					}
					if len(want) == 0 {
						t.Fatalf("%s at %s: no data on the plain Prometheus", expr, ts.Format(time.RFC3339))
					}
					if d := diffAnswers(got, want); d != "" {
						return false, fmt.Sprintf("%s at %s:\n%s", expr, ts.Format(time.RFC3339), d)
					}
				}
			}
			return true, ""
		})
		t.Logf("the store gateway serves the history (%s into the test)", time.Since(started).Round(time.Second))
	})

	ruler := startThanos(t, thanos, dir, "rule", "rule", "--grpc-address="+rulerGRPC,
		"--data-dir="+filepath.Join(dir, "rule"), "--rule-file="+rulePath, "--eval-interval="+thanosInterval.String(),
		"--query="+query.URL(), `--label=rule_replica="0"`)
	waitEndpoints(t, query, map[string]int{"sidecar": len(thanosReplicas), "store": 1, "rule": 1})

	ruleNames := ruleFileRules(t, ruleText)
	// Both sides evaluate every group a few times once all of Thanos is up:
	// a rule that reads another's record sees it one evaluation later.
	ready := time.Now()
	settled := ready.Add(3 * thanosInterval)
	for side, base := range map[string]string{"the Thanos ruler": ruler.URL(), "the plain Prometheus": plain.URL()} {
		testharness.Eventually(t, 3*time.Minute, 2*time.Second, side+" evaluates every rule since Thanos is up", func() (bool, string) {
			rs, err := getRules(base)
			if err != nil {
				return false, err.Error()
			}
			if len(rs) != len(ruleNames) {
				return false, fmt.Sprintf("%d rules, want %d", len(rs), len(ruleNames))
			}
			for _, r := range rs {
				if r.LastEvaluation.Before(settled) {
					return false, fmt.Sprintf("%s/%s last evaluated at %s (health %s %s)", r.group, r.Name, r.LastEvaluation.Format(time.RFC3339), r.Health, r.LastError)
				}
			}
			return true, ""
		})
	}

	t.Run("every rule and alert evaluates in the ruler", func(t *testing.T) {
		rs, err := getRules(ruler.URL())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.group+"/"+r.Name)
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("%s/%s: health %q, last error %q", r.group, r.Name, r.Health, r.LastError)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, ruleNames) {
			t.Errorf("the ruler has rules %v, want those of the shipped files %v", got, ruleNames)
		}
	})

	t.Run("alerts as on Prometheus", func(t *testing.T) {
		alerts := func(base string) []string {
			rs, err := getRules(base)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range rs {
				for _, a := range r.Alerts {
					delete(a.Labels, "rule_replica")
					out = append(out, a.State+" "+labelKey(a.Labels))
				}
			}
			slices.Sort(out)
			return out
		}
		got, want := alerts(ruler.URL()), alerts(plain.URL())
		if !slices.Equal(got, want) {
			t.Errorf("the ruler's alerts:\n%s\nthe plain Prometheus':\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(want) == 0 {
			t.Error("no alert is pending or firing: the alerts' comparison is not exercised")
		}
	})

	t.Run("fleet dashboard queries as on Prometheus", func(t *testing.T) {
		qs := fleetDashboardQueries(t)
		// A host could still change between the two sides' scrapes or
		// evaluations in a way the fleet's draw did not foresee: a
		// difference must hold at three instants to count.
		var diffs []string
		for attempt := range 3 {
			if attempt > 0 {
				time.Sleep(thanosInterval + time.Second)
			}
			at := time.Now().Add(-time.Second).Truncate(time.Second)
			// Not on the history's grid: Prometheus 2 (Debian's) counts a
			// sample on a range's left edge, Prometheus 3 (in Thanos)
			// does not.
			if off := at.Sub(cfg.Start) % step; off < 2*time.Second || off > step-2*time.Second {
				at = at.Add(-5 * time.Second)
			}
			diffs = diffs[:0]
			withData := 0
			for _, q := range qs {
				var start time.Time
				var qstep time.Duration
				if !q.instant {
					start, qstep = at.Add(-fleetQueryRange), q.step
				}
				want, _, err := plain.Query(ctx, q.expr, start, at, qstep)
				if err != nil {
					t.Fatalf("%s on the plain Prometheus: %v", q.key, err)
				}
				got, _, err := fleetgen.Query(ctx, query.URL(), thanosParams, q.expr, start, at, qstep)
				if err != nil {
					diffs = append(diffs, fmt.Sprintf("%s: %v", q.key, err))
					continue
				}
				if d := diffAnswers(got, want); d != "" {
					diffs = append(diffs, fmt.Sprintf("%s (%s):\n%s", q.key, q.expr, d))
				}
				if len(want) > 0 {
					withData++
				}
			}
			if len(diffs) == 0 {
				t.Logf("%d fleet dashboard queries, %d with data, answer the same at %s (attempt %d)", len(qs), withData, at.Format(time.RFC3339), attempt+1)
				if withData < len(qs)*3/4 {
					t.Errorf("only %d of %d queries have data: the comparison is mostly of empty answers", withData, len(qs))
				}
				return
			}
		}
		t.Errorf("%d fleet dashboard queries answer differently through Thanos Query than on Prometheus:\n%s", len(diffs), strings.Join(diffs, "\n"))
	})

	t.Run("every rule still evaluates in the ruler", func(t *testing.T) {
		rs, err := getRules(ruler.URL())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("%s/%s: health %q, last error %q", r.group, r.Name, r.Health, r.LastError)
			}
		}
	})
	t.Logf("%s in all", time.Since(started).Round(time.Second))
}

// quietFleet returns cfg with the first seed whose fleet has no host
// joining, leaving, restarting, being flagged or ending a cycle from 70
// minutes before now (the longest range the fleet's rules compare at
// now, an hour, plus a margin) to 15 minutes after: the two sides scrape
// and evaluate at instants of their own, and see the same values only
// while the fleet stands still.
func quietFleet(t *testing.T, cfg fleetgen.Config, now time.Time) fleetgen.Config {
	t.Helper()
	from, to := now.Add(-70*time.Minute), now.Add(15*time.Minute)
	near := func(ts time.Time) bool { return !ts.IsZero() && !ts.Before(from) && !ts.After(to) }
	for seed := uint64(1); seed < 1000; seed++ {
		cfg.Seed = seed
		quiet := true
		for _, h := range fleetgen.Fleet(cfg) {
			events := []time.Time{h.Join, h.Leave, h.Restart, h.RegressionAt}
			if !h.RegressionAt.IsZero() {
				events = append(events, h.RegressionAt.Add(2*cfg.Cycle))
			}
			for _, since := range []time.Time{h.Join, h.Restart} {
				if since.IsZero() {
					continue
				}
				for ts := since.Add(time.Minute); ts.Before(to.Add(cfg.Cycle)); ts = ts.Add(cfg.Cycle) {
					events = append(events, ts)
				}
			}
			if slices.ContainsFunc(events, near) {
				quiet = false
				break
			}
		}
		if quiet {
			return cfg
		}
	}
	t.Fatal("no seed below 1000 draws a fleet that stands still during the test")
	return cfg
}

// shortenedRules are the shipped rule files in one, every group at
// interval (those without an interval take the global one, also interval).
func shortenedRules(t *testing.T, interval time.Duration) []byte {
	t.Helper()
	var all bytes.Buffer
	for i, name := range []string{rulesFile, rawRatioFile} {
		b, err := os.ReadFile(repoPath(name))
		if err != nil {
			t.Fatal(err)
		}
		b = rulesEvery(b, interval)
		if i > 0 {
			// The groups only, after the first file's.
			_, groups, ok := bytes.Cut(b, []byte("\ngroups:\n"))
			if !ok {
				t.Fatalf("%s: no groups", name)
			}
			b = groups
		}
		all.Write(b)
	}
	return all.Bytes()
}

// ruleFileRules are the rules of a rule file, as group/name (record or
// alert), sorted.
func ruleFileRules(t *testing.T, text []byte) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Record string `yaml:"record"`
				Alert  string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(text, &f); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, g.Name+"/"+r.Record+r.Alert)
		}
	}
	if len(out) < 40 {
		t.Fatalf("%d rules in the shipped files", len(out))
	}
	slices.Sort(out)
	return out
}

// apiRule is a rule as /api/v1/rules lists it (Prometheus and the Thanos
// ruler alike), with its group.
type apiRule struct {
	group          string
	Name           string    `json:"name"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
	Alerts         []struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	} `json:"alerts"`
}

func getRules(base string) ([]apiRule, error) {
	resp, err := http.Get(base + "/api/v1/rules")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Data struct {
			Groups []struct {
				Name  string    `json:"name"`
				Rules []apiRule `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s/api/v1/rules: %w: %s", base, err, testharness.Tail(string(body), 5))
	}
	var out []apiRule
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			rule.group = g.Name
			out = append(out, rule)
		}
	}
	return out, nil
}

// diffAnswers compares two answers of the query API, series by label set:
// the same label sets, with the same timestamps and values within 1e-9
// (relative). It returns the differences ("" when none), a few at most.
func diffAnswers(got, want []fleetgen.Sample) string {
	points := func(r []fleetgen.Sample) map[string][][2]float64 {
		out := map[string][][2]float64{}
		for _, s := range r {
			vs := s.Values
			if s.Value != nil {
				vs = [][]any{s.Value}
			}
			var ps [][2]float64
			for _, p := range vs {
				ts, _ := p[0].(float64)
				v, err := strconv.ParseFloat(fmt.Sprint(p[1]), 64)
				if err != nil {
					v = math.NaN()
				}
				ps = append(ps, [2]float64{ts, v})
			}
			out[labelKey(s.Metric)] = ps
		}
		return out
	}
	g, w := points(got), points(want)
	var diffs []string
	for k, wp := range w {
		gp, ok := g[k]
		if !ok {
			diffs = append(diffs, "  missing through Thanos: "+k)
			continue
		}
		if d := diffPoints(gp, wp); d != "" {
			diffs = append(diffs, "  "+k+": "+d)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			diffs = append(diffs, "  only through Thanos: "+k)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 6 {
		diffs = append(diffs[:6], fmt.Sprintf("  ... %d more", len(diffs)-6))
	}
	return strings.Join(diffs, "\n")
}

func diffPoints(got, want [][2]float64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d points through Thanos, %d on Prometheus", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		same := g[1] == w[1] || (math.IsNaN(g[1]) && math.IsNaN(w[1])) ||
			math.Abs(g[1]-w[1]) <= 1e-9*math.Max(math.Abs(g[1]), math.Abs(w[1]))
		if g[0] != w[0] || !same {
			return fmt.Sprintf("at %s %v through Thanos, at %s %v on Prometheus",
				time.Unix(int64(g[0]), 0).UTC().Format(time.RFC3339), g[1], time.Unix(int64(w[0]), 0).UTC().Format(time.RFC3339), w[1])
		}
	}
	return ""
}

// labelKey is a label set as one sorted string.
func labelKey(l map[string]string) string {
	ks := make([]string, 0, len(l))
	for k := range l {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range ks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, l[k])
	}
	b.WriteString("}")
	return b.String()
}

// blockDirs are the TSDB blocks in a data directory.
func blockDirs(t *testing.T, data string) []string {
	t.Helper()
	entries, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(data, e.Name(), "meta.json")); err == nil {
			out = append(out, filepath.Join(data, e.Name()))
		}
	}
	return out
}

// copyBlocks copies blocks into a data directory, with newIDs under block
// IDs of their own (a ULID: the first 10 characters its time, the rest
// random).
func copyBlocks(t *testing.T, blocks []string, data string, newIDs bool) {
	t.Helper()
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	for _, b := range blocks {
		id := filepath.Base(b)
		if newIDs {
			r := make([]byte, 16)
			for i := range r {
				r[i] = crockford[rand.IntN(len(crockford))]
			}
			id = id[:10] + string(r)
		}
		dst := filepath.Join(data, id)
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-r", b, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v: %s", b, err, out)
		}
		if newIDs {
			meta := filepath.Join(dst, "meta.json")
			m, err := os.ReadFile(meta)
			if err != nil {
				t.Fatal(err)
			}
			m = bytes.ReplaceAll(m, []byte(filepath.Base(b)), []byte(id))
			if err := os.WriteFile(meta, m, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// startThanos starts a Thanos component (thanosbed.Start) and stops it
// when the test ends, with the tail of its output when the test failed.
func startThanos(t *testing.T, bin, dir, name, component string, args ...string) *thanosbed.Process {
	t.Helper()
	p, err := thanosbed.Start(t.Context(), bin, dir, name, component, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("thanos %s:\n%s", name, p.LogTail(20))
		}
	})
	return p
}

// waitEndpoints waits until Thanos Query has as many healthy endpoints
// of each kind (sidecar, store, rule) as want says.
func waitEndpoints(t *testing.T, query *thanosbed.Process, want map[string]int) {
	t.Helper()
	if err := thanosbed.WaitEndpoints(t.Context(), query, want, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}
