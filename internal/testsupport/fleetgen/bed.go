package fleetgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// Bed is a real Prometheus over a backfilled TSDB, loaded with a rule
// file. Everything it runs is niced (10): the machines it runs on are
// shared.
type Bed struct {
	Prometheus, Promtool string
	Dir                  string // working directory: data/, config, rule files
	Rules                string // the rule file Prometheus loads
	// ExternalLabels are the global external_labels of its configuration.
	ExternalLabels map[string]string
	// Flags are extra command-line flags of Prometheus.
	Flags []string
	// Interval is the global scrape and evaluation interval (0: 1m).
	Interval time.Duration
	// SelfPlaceholder, when set, is replaced in the scrape configurations
	// by Prometheus' own address (known only when it starts), so that it
	// can scrape itself.
	SelfPlaceholder string
	// Log receives Prometheus' output.
	Log io.Writer

	addr   string
	scrape string
	cmd    *exec.Cmd
	done   chan struct{}
}

// Data is the TSDB directory.
func (b *Bed) Data() string { return filepath.Join(b.Dir, "data") }

// URL is the base URL of the running Prometheus.
func (b *Bed) URL() string { return "http://" + b.addr }

func nice(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nice", append([]string{"-n", "10", name}, args...)...)
}

// BackfillOpenMetrics turns an OpenMetrics file into blocks in the TSDB
// (promtool tsdb create-blocks-from openmetrics), with blocks of at most
// maxBlock (promtool reads the whole file once per block).
func (b *Bed) BackfillOpenMetrics(ctx context.Context, file string, maxBlock time.Duration) error {
	cmd := nice(ctx, b.Promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
		"--max-block-duration="+maxBlock.String(), file, b.Data())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("promtool create-blocks-from openmetrics: %w\n%s", err, tail(out))
	}
	return nil
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Start starts Prometheus on the TSDB with the rule file (no scrape
// targets unless scrapeConfigs is given, YAML of scrape_configs entries)
// and waits until it is ready.
func (b *Bed) Start(ctx context.Context, scrapeConfigs string) error {
	if err := os.MkdirAll(b.Data(), 0o755); err != nil {
		return err
	}
	// rule_files are globs: one that matches nothing is skipped silently.
	if !filepath.IsAbs(b.Rules) {
		return fmt.Errorf("rule file %s: want an absolute path", b.Rules)
	}
	if _, err := os.Stat(b.Rules); err != nil {
		return fmt.Errorf("rule file: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b.addr = l.Addr().String()
	l.Close()
	b.scrape = scrapeConfigs
	cfgPath, err := b.writeConfig()
	if err != nil {
		return err
	}
	args := append([]string{"--config.file=" + cfgPath, "--storage.tsdb.path=" + b.Data(),
		"--storage.tsdb.retention.time=400d", "--web.listen-address=" + b.addr, "--log.level=warn"}, b.Flags...)
	b.cmd = nice(context.Background(), b.Prometheus, args...)
	if b.Log != nil {
		b.cmd.Stdout, b.cmd.Stderr = b.Log, b.Log
	}
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	b.done = make(chan struct{})
	go func() { b.cmd.Wait(); close(b.done) }()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-b.done:
			return fmt.Errorf("prometheus exited before it was ready")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if resp, err := http.Get(b.URL() + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("prometheus not ready within 5 minutes")
}

// writeConfig writes Prometheus' configuration file and returns its path.
func (b *Bed) writeConfig() (string, error) {
	var ext strings.Builder
	if len(b.ExternalLabels) > 0 {
		ext.WriteString("  external_labels:\n")
		for k, v := range b.ExternalLabels {
			fmt.Fprintf(&ext, "    %s: %q\n", k, v)
		}
	}
	iv := b.Interval
	if iv == 0 {
		iv = time.Minute
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: %s\n  evaluation_interval: %s\n%srule_files:\n  - %s\n", iv, iv, ext.String(), b.Rules)
	if scrapeConfigs := b.scrape; scrapeConfigs != "" {
		if b.SelfPlaceholder != "" {
			scrapeConfigs = strings.ReplaceAll(scrapeConfigs, b.SelfPlaceholder, b.addr)
		}
		cfg += "scrape_configs:\n" + scrapeConfigs
	}
	cfgPath := filepath.Join(b.Dir, "prometheus.yml")
	return cfgPath, os.WriteFile(cfgPath, []byte(cfg), 0o644)
}

// Reload makes the running Prometheus load another rule file (its
// configuration rewritten, then SIGHUP) and waits until it has.
func (b *Bed) Reload(ctx context.Context, rules string) error {
	if b.cmd == nil || b.cmd.Process == nil {
		return fmt.Errorf("prometheus is not running")
	}
	b.Rules = rules
	if _, err := b.writeConfig(); err != nil {
		return err
	}
	// nice executes Prometheus in its own process: the signal reaches it.
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var r struct {
			Data struct {
				YAML string `json:"yaml"`
			} `json:"data"`
		}
		resp, err := http.Get(b.URL() + "/api/v1/status/config")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
		}
		if err == nil && strings.Contains(r.Data.YAML, rules) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus did not load %s within 2 minutes (%v)", rules, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Stop stops Prometheus (SIGTERM, then SIGKILL after 30s).
func (b *Bed) Stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	b.cmd.Process.Signal(os.Interrupt)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd = nil
}

// ruleFile is the part of a Prometheus rule file the backfill needs.
type ruleFile struct {
	Groups []struct {
		Name     string           `yaml:"name"`
		Interval string           `yaml:"interval,omitempty"`
		Rules    []map[string]any `yaml:"rules"`
	} `yaml:"groups"`
}

// DashboardRuleGroups are the rule groups whose recorded series a
// backfilled history carries: those the fleet dashboard reads over its
// range (the hourly group for the counters it counts over the range).
var DashboardRuleGroups = []string{"layerprobe.fleet", "layerprobe.fleet.drivers", "layerprobe.fleet.kernels", "layerprobe.fleet.health", "layerprobe.recording.hourly"}

// RuleLayers splits the recording rules of a rule file into layers: a
// rule reads only rules of earlier layers. promtool's rule backfill
// evaluates every rule against the data as it is, so a rule on top of
// another needs that one's blocks first.
// Only the groups named are kept (none named: all).
func RuleLayers(rules []byte, groups ...string) ([][]byte, error) {
	var f ruleFile
	if err := yaml.Unmarshal(rules, &f); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if len(groups) > 0 {
		kept := f.Groups[:0]
		for _, g := range f.Groups {
			if slices.Contains(groups, g.Name) {
				kept = append(kept, g)
			}
		}
		f.Groups = kept
	}
	depth := map[string]int{}
	type rec struct{ group, interval, record string }
	var all []struct {
		rec
		body map[string]any
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name, _ := r["record"].(string)
			if name == "" {
				continue
			}
			expr, _ := r["expr"].(string)
			d := 0
			for other, od := range depth {
				if regexp.MustCompile(`(^|[^a-z_:])` + regexp.QuoteMeta(other) + `($|[^a-z0-9_:])`).MatchString(expr) {
					d = max(d, od+1)
				}
			}
			if old, ok := depth[name]; !ok || d > old {
				depth[name] = d
			}
			all = append(all, struct {
				rec
				body map[string]any
			}{rec{g.Name, g.Interval, name}, r})
		}
	}
	var layers [][]byte
	for d := 0; ; d++ {
		var lf ruleFile
		groups := map[string]int{}
		n := 0
		for _, r := range all {
			if depth[r.record] != d {
				continue
			}
			i, ok := groups[r.group]
			if !ok {
				i = len(lf.Groups)
				groups[r.group] = i
				lf.Groups = append(lf.Groups, struct {
					Name     string           `yaml:"name"`
					Interval string           `yaml:"interval,omitempty"`
					Rules    []map[string]any `yaml:"rules"`
				}{Name: r.group, Interval: r.interval})
			}
			lf.Groups[i].Rules = append(lf.Groups[i].Rules, r.body)
			n++
		}
		if n == 0 {
			break
		}
		b, err := yaml.Marshal(lf)
		if err != nil {
			return nil, err
		}
		layers = append(layers, b)
	}
	return layers, nil
}

// BackfillRules evaluates the recording rules of the bed's rule file over
// [start, end) layer by layer (promtool tsdb create-blocks-from rules),
// restarting Prometheus after each layer so that the next one reads it.
// Prometheus must be running; it runs again afterwards. Only the rule
// groups named are backfilled (none named: all).
//
// The start is moved back to promtool's 2h block boundary: promtool
// evaluates a group at its own offset in the interval (a hash of the file
// and group, as Prometheus does), block by block, and stops at the first
// block whose first evaluation falls after the block's end, which for an
// hourly group is the first block when start is in its last hour. From a
// block boundary the first block holds an evaluation of any group of up
// to 2h.
func (b *Bed) BackfillRules(ctx context.Context, start, end time.Time, scrapeConfigs string, groups ...string) error {
	start = start.Truncate(2 * time.Hour)
	src, err := os.ReadFile(b.Rules)
	if err != nil {
		return err
	}
	layers, err := RuleLayers(src, groups...)
	if err != nil {
		return err
	}
	for i, layer := range layers {
		file := filepath.Join(b.Dir, fmt.Sprintf("rules-layer-%d.yml", i))
		if err := os.WriteFile(file, layer, 0o644); err != nil {
			return err
		}
		out := filepath.Join(b.Dir, fmt.Sprintf("rules-blocks-%d", i))
		cmd := nice(ctx, b.Promtool, "tsdb", "create-blocks-from", "rules", "--quiet",
			"--url="+b.URL(), "--start="+fmt.Sprint(start.Unix()), "--end="+fmt.Sprint(end.Unix()),
			"--output-dir="+out, file)
		if o, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("promtool create-blocks-from rules (layer %d): %w\n%s", i, err, tail(o))
		}
		blocks, _ := os.ReadDir(out)
		for _, blk := range blocks {
			if err := os.Rename(filepath.Join(out, blk.Name()), filepath.Join(b.Data(), blk.Name())); err != nil {
				return err
			}
		}
		b.Stop()
		if err := b.Start(ctx, scrapeConfigs); err != nil {
			return err
		}
	}
	return nil
}

// Sample is one series of a query's answer.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// Query runs an instant (end zero: now) or range query (step > 0) and
// returns the result and how long Prometheus took to answer.
func (b *Bed) Query(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Sample, time.Duration, error) {
	return Query(ctx, b.URL(), nil, expr, start, end, step)
}

// Query runs an instant (end zero: now) or range query (step > 0) on the
// Prometheus query API at base (Prometheus, or any server that speaks its
// API, such as Thanos Query), with the extra form parameters given, and
// returns the result and how long the server took to answer.
func Query(ctx context.Context, base string, params url.Values, expr string, start, end time.Time, step time.Duration) ([]Sample, time.Duration, error) {
	q := url.Values{"query": {expr}}
	for k, v := range params {
		q[k] = v
	}
	path := "/api/v1/query"
	if step > 0 {
		path = "/api/v1/query_range"
		q.Set("start", fmt.Sprint(start.Unix()))
		q.Set("end", fmt.Sprint(end.Unix()))
		q.Set("step", fmt.Sprint(int(step.Seconds())))
	} else if !end.IsZero() {
		// Milliseconds: a recorded sample's own time selects it.
		q.Set("time", fmt.Sprintf("%.3f", float64(end.UnixMilli())/1000))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(q.Encode()))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	if err != nil {
		return nil, took, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, took, fmt.Errorf("%s: %w: %s", expr, err, tail(body))
	}
	if r.Status != "success" {
		return nil, took, fmt.Errorf("%s: %s", expr, r.Error)
	}
	var out []Sample
	if bytes.HasPrefix(bytes.TrimSpace(r.Data.Result), []byte("[")) {
		if err := json.Unmarshal(r.Data.Result, &out); err != nil {
			return nil, took, err
		}
	}
	return out, took, nil
}
