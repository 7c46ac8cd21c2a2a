//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/fleetgen"
	"github.com/layerprobe/layerprobe/internal/testsupport/thanosbed"
)

// The fleet section's distributed store: after the single Prometheus is
// measured, the same history and the same live agents through Thanos, as
// a fleet that outgrew one Prometheus runs it. The history's day blocks
// are in a bucket (FILESYSTEM, the blocks hard-linked, as the sidecar
// would have uploaded them) served by a store gateway; the running
// Prometheus keeps scraping the agents, with no rules now, behind a
// sidecar that serves only what came after the history (--min-time);
// Thanos Query over the sidecar, the store gateway and a Thanos ruler,
// which evaluates the shipped rules through Thanos Query. Measured as on
// Prometheus: every fleet and host dashboard query through Thanos Query,
// the ruler's rule group durations while the queries run, and every
// component's resident memory.

// fleetThanosRun is the distributed store's side of a fleet size.
type fleetThanosRun struct {
	Version string `json:"version"`
	// ReadySeconds: from the bucket's first block to Thanos Query
	// answering the history and the live data.
	ReadySeconds      float64            `json:"ready_seconds"`
	Queries           []fleetQuery       `json:"queries"`
	RuleGroupSeconds  map[string]float64 `json:"rule_group_seconds"`
	RuleGroupInterval map[string]float64 `json:"rule_group_interval_seconds"`
	// ResidentBytes per component (prometheus: the scraping server
	// behind the sidecar, head only).
	ResidentBytes map[string]float64 `json:"resident_bytes"`
	Error         string             `json:"error,omitempty"`
}

// thanosParams: one answer per series across the replicas (the bucket's
// and the sidecar's replica "a", the ruler's rule_replica), and an error
// rather than a partial answer.
var thanosParams = url.Values{"dedup": {"true"}, "partial_response": {"false"}}

func fleetThanos(ctx context.Context, p *progress, bed *fleetgen.Bed, dir string, history []string, historyEnd time.Time,
	rules string, cfg fleetgen.Config, hosts []fleetgen.Host) *fleetThanosRun {
	tr := &fleetThanosRun{RuleGroupSeconds: map[string]float64{}, RuleGroupInterval: map[string]float64{}, ResidentBytes: map[string]float64{}}
	if err := tr.run(ctx, p, bed, dir, history, historyEnd, rules, cfg, hosts); err != nil {
		tr.Error = err.Error()
		p.logf("fleet %d hosts on Thanos: %v", len(hosts), err)
	}
	return tr
}

func (tr *fleetThanosRun) run(ctx context.Context, p *progress, bed *fleetgen.Bed, dir string, history []string, historyEnd time.Time,
	rules string, cfg fleetgen.Config, hosts []fleetgen.Host) error {
	bin := thanosbed.Bin
	if !fileExists(bin) {
		return fmt.Errorf("%s not built (scripts/build-thanos.sh, run by make deps-test)", bin)
	}
	if out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput(); err == nil {
		// "thanos, version 0.42.4 (branch: ...": the version.
		if f := strings.Fields(string(out)); len(f) >= 3 && f[1] == "version" {
			tr.Version = f[2]
		}
	}
	began := time.Now()
	dir = filepath.Join(dir, "thanos")
	bucket := filepath.Join(dir, "bucket")
	for _, b := range history {
		if err := thanosbed.AddToBucket(b, bucket, "", bed.ExternalLabels); err != nil {
			return fmt.Errorf("bucket: %w", err)
		}
	}
	bucketCfg := filepath.Join(dir, "bucket.yml")
	noRules := filepath.Join(dir, "no-rules.yml")
	for f, text := range map[string]string{bucketCfg: thanosbed.BucketConfig(bucket), noRules: "groups: []\n"} {
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			return err
		}
	}
	// The rules move to the ruler: Prometheus only scrapes.
	if err := bed.Reload(ctx, noRules); err != nil {
		return err
	}
	var procs []*thanosbed.Process
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop()
		}
	}()
	start := func(ready time.Duration, name string, args ...string) (*thanosbed.Process, error) {
		pr, err := thanosbed.StartWithin(ctx, ready, bin, dir, name, name, args...)
		if err != nil {
			return nil, err
		}
		procs = append(procs, pr)
		return pr, nil
	}
	sidecar, err := start(2*time.Minute, "sidecar", "--tsdb.path="+bed.Data(), "--prometheus.url="+bed.URL(),
		"--min-time="+historyEnd.UTC().Format(time.RFC3339))
	if err != nil {
		return err
	}
	store, err := start(20*time.Minute, "store", "--data-dir="+filepath.Join(dir, "store"), "--objstore.config-file="+bucketCfg)
	if err != nil {
		return err
	}
	rulerGRPC, err := thanosbed.FreeAddr()
	if err != nil {
		return err
	}
	query, err := start(2*time.Minute, "query", "--query.replica-label=replica", "--query.replica-label=rule_replica",
		"--endpoint.sd-config="+thanosbed.EndpointConfig(sidecar.GRPC, store.GRPC, rulerGRPC))
	if err != nil {
		return err
	}
	thanosQuery := func(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]fleetgen.Sample, time.Duration, error) {
		return fleetgen.Query(ctx, query.URL(), thanosParams, expr, start, end, step)
	}
	if err := thanosbed.WaitEndpoints(ctx, query, map[string]int{"sidecar": 1, "store": 1}, 5*time.Minute); err != nil {
		return err
	}
	// The history through the store gateway, as on Prometheus, and the
	// live agents through the sidecar.
	if err := checkHistory(ctx, thanosQuery, cfg.Start.Add(12*time.Hour)); err != nil {
		return fmt.Errorf("through Thanos Query: %w", err)
	}
	if err := sameCount(ctx, bed.Query, thanosQuery, "count(layerprobe_build_info)", time.Now().Add(-time.Minute)); err != nil {
		return err
	}
	tr.ReadySeconds = time.Since(began).Seconds()
	ruler, err := start(2*time.Minute, "rule", "--grpc-address="+rulerGRPC, "--data-dir="+filepath.Join(dir, "rule"),
		"--rule-file="+rules, "--eval-interval=1m", "--query="+query.URL(), `--label=rule_replica="0"`)
	if err != nil {
		return err
	}
	if err := thanosbed.WaitEndpoints(ctx, query, map[string]int{"sidecar": 1, "store": 1, "rule": 1}, 2*time.Minute); err != nil {
		return err
	}
	p.logf("fleet %d hosts on Thanos %s: %d blocks in the bucket, history served in %s; waiting for the ruler's groups",
		len(hosts), tr.Version, len(history), dur(tr.ReadySeconds))
	// As on Prometheus: every group of 5 minutes or less evaluated since
	// 5 minutes after the ruler's start.
	settled := float64(time.Now().Add(5 * time.Minute).Unix())
	deadline := time.Now().Add(12 * time.Minute)
	for {
		groups, err := ruleGroups(ruler.URL())
		done := err == nil && len(groups) >= 3
		for _, g := range groups {
			if g.interval <= 300 && g.last <= settled {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the ruler's groups did not evaluate within 12 minutes: %v %v", groups, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(15 * time.Second):
		}
	}
	// The groups' durations while the queries run: the largest seen.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if groups, err := ruleGroups(ruler.URL()); err == nil {
				mu.Lock()
				for name, g := range groups {
					tr.RuleGroupSeconds[name] = max(tr.RuleGroupSeconds[name], g.duration)
					tr.RuleGroupInterval[name] = g.interval
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Second):
			}
		}
	}()
	tr.Queries = fleetQueries(ctx, thanosQuery, hosts)
	close(stop)
	wg.Wait()
	for _, pr := range []*thanosbed.Process{sidecar, store, query, ruler} {
		if v, err := thanosbed.Metric(pr.URL(), "process_resident_memory_bytes", nil); err == nil {
			tr.ResidentBytes[pr.Name] = v
		}
	}
	if r, _, err := bed.Query(ctx, `process_resident_memory_bytes{job="prometheus"}`, time.Time{}, time.Time{}, 0); err == nil && len(r) == 1 {
		tr.ResidentBytes["prometheus"] = sampleValue(r[0])
	}
	p.logf("fleet %d hosts on Thanos: %d queries measured; resident %v; rule groups %v", len(hosts), len(tr.Queries), tr.ResidentBytes, tr.RuleGroupSeconds)
	return nil
}

// sameCount checks that two servers give the same single value for expr
// at at.
func sameCount(ctx context.Context, want, got queryFunc, expr string, at time.Time) error {
	w, _, err := want(ctx, expr, time.Time{}, at, 0)
	if err != nil {
		return err
	}
	g, _, err := got(ctx, expr, time.Time{}, at, 0)
	if err != nil {
		return fmt.Errorf("through Thanos Query: %w", err)
	}
	if len(w) != 1 || len(g) != 1 || sampleValue(w[0]) != sampleValue(g[0]) {
		return fmt.Errorf("%s at %s: %v through Thanos Query, %v on Prometheus", expr, at.UTC().Format(time.RFC3339), g, w)
	}
	return nil
}

// ruleGroup is what a ruler's /metrics says of one of its groups.
type ruleGroup struct{ interval, last, duration float64 }

// ruleGroups reads the rule groups' interval, last evaluation and last
// duration from a Prometheus-style /metrics (the Thanos ruler's), by
// group name (without its file).
func ruleGroups(base string) (map[string]ruleGroup, error) {
	out := map[string]ruleGroup{}
	for _, m := range []string{"prometheus_rule_group_interval_seconds", "prometheus_rule_group_last_evaluation_timestamp_seconds",
		"prometheus_rule_group_last_duration_seconds"} {
		ss, err := thanosbed.Metrics(base, m)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			name := s.Labels["rule_group"]
			if i := strings.LastIndex(name, ";"); i >= 0 {
				name = name[i+1:]
			}
			g := out[name]
			switch m {
			case "prometheus_rule_group_interval_seconds":
				g.interval = s.Value
			case "prometheus_rule_group_last_evaluation_timestamp_seconds":
				g.last = s.Value
			default:
				g.duration = s.Value
			}
			out[name] = g
		}
	}
	return out, nil
}

// historyBlocks are the TSDB blocks in a data directory.
func historyBlocks(data string) ([]string, error) {
	entries, err := os.ReadDir(data)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if fileExists(filepath.Join(data, e.Name(), "meta.json")) {
			out = append(out, filepath.Join(data, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}
