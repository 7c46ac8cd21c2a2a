// Command fleetrules measures what each rule of a rule file costs over a
// generated fleet in a real Prometheus: the fleet test bed of the bench's
// fleet section (internal/testsupport/fleetgen, Debian's Prometheus and
// promtool), kept in a directory so that later runs skip the backfill.
//
// It backfills HOURS of history of HOSTS agents (once per directory),
// starts Prometheus on it with the rule file and the agents scraped live
// every minute, waits, then prints each group's evaluation time
// (prometheus_rule_group_last_duration_seconds over the wait: median and
// largest), each rule's last evaluation time (/api/v1/rules), and each
// rule's expression run alone as an instant query with the samples it
// touched (stats=all); with -dashboard, every query of those dashboards at
// 7 and 30 days too. To compare two rule files under the same load, give
// both: -rules a.yml,b.yml loads them side by side, the second one's
// recorded series, alerts and groups renamed (prefix "before").
//
//	cd bench && go run ./fleetrules -hosts 1000 -hours 24 -rules ../deploy/prometheus/layerprobe-rules.yml
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/fleetgen"
	"go.yaml.in/yaml/v3"
)

func main() {
	hosts := flag.Int("hosts", 200, "agents in the fleet")
	hours := flag.Int("hours", 24, "hours of history to backfill")
	dir := flag.String("dir", "/var/tmp/layerprobe-fleetrules", "working directory: the TSDB, kept between runs of the same -hosts and -hours")
	rules := flag.String("rules", "../deploy/prometheus/layerprobe-rules.yml", "rule file, or two comma-separated: the second loaded beside the first, renamed")
	wait := flag.Duration("wait", 12*time.Minute, "live scrape and rule evaluation before measuring (two evaluations of a 5m group)")
	repeat := flag.Int("repeat", 3, "answers per query (the median is printed)")
	dashboard := flag.String("dashboard", "", "dashboard JSON files (comma-separated) whose queries are timed too")
	flag.Parse()
	if err := run(*hosts, *hours, *dir, *rules, *wait, *repeat, *dashboard); err != nil {
		log.Fatal(err)
	}
}

func run(hosts, hours int, dir, rules string, wait time.Duration, repeat int, dashboard string) error {
	ctx := context.Background()
	f, err := os.Open("../test/ops/testdata/agent-scrape.prom")
	if err != nil {
		return err
	}
	rec, err := fleetgen.ParseRecording(f, "e0")
	f.Close()
	if err != nil {
		return err
	}
	dir = filepath.Join(dir, fmt.Sprintf("%dx%dh", hosts, hours))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The history's end is kept with it, so that a later run's live
	// scrape continues the same fleet.
	var end time.Time
	if b, err := os.ReadFile(filepath.Join(dir, "end")); err == nil {
		end, err = time.Parse(time.RFC3339, strings.TrimSpace(string(b)))
		if err != nil {
			return err
		}
	} else {
		end = time.Now().Truncate(5 * time.Minute)
		if err := os.WriteFile(filepath.Join(dir, "end"), []byte(end.Format(time.RFC3339)), 0o644); err != nil {
			return err
		}
	}
	// The fleet's period reaches a week past the history, so that the
	// agents still answer the live scrape of a later run (every agent is
	// gone an hour after End).
	cfg := fleetgen.Config{Hosts: hosts, Start: end.Add(-time.Duration(hours) * time.Hour), End: end.Add(7 * 24 * time.Hour),
		Step: 5 * time.Minute, Cycle: 6 * time.Hour, Seed: 1000 + uint64(hosts), Clusters: []string{"eu", "us"}}
	fleet := fleetgen.Fleet(cfg)
	ruleFile, err := ruleFile(dir, rules)
	if err != nil {
		return err
	}
	bed := &fleetgen.Bed{Prometheus: "/usr/bin/prometheus", Promtool: "/usr/bin/promtool", Dir: dir, Rules: ruleFile, Log: os.Stderr}
	if _, err := os.Stat(filepath.Join(dir, "loaded")); err != nil {
		if err := backfill(ctx, bed, rec, fleet, cfg, end); err != nil {
			return err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: fleetgen.Handler(rec, fleet, cfg, time.Now)}
	go srv.Serve(l)
	defer srv.Close()
	bed.SelfPlaceholder = "SELF"
	scrape := fleetgen.ScrapeConfigs(l.Addr().String(), fleet, time.Minute, true) +
		"  - job_name: prometheus\n    static_configs: [{targets: [\"SELF\"]}]\n"
	if err := bed.Start(ctx, scrape); err != nil {
		return err
	}
	defer bed.Stop()
	fmt.Printf("Prometheus at %s; %d hosts, %dh of history; waiting %s\n", bed.URL(), hosts, hours, wait)
	time.Sleep(wait)

	// A group not evaluated yet has a last duration of 0: left out.
	w := fmt.Sprintf("(prometheus_rule_group_last_duration_seconds > 0)[%ds:1m]", int(wait.Seconds()))
	for _, q := range []string{
		"max by (rule_group) (quantile_over_time(0.5, " + w + "))",
		"max by (rule_group) (max_over_time(" + w + "))",
		`prometheus_tsdb_head_series{job="prometheus"}`, `process_resident_memory_bytes{job="prometheus"}`,
	} {
		r, err := query(bed.URL(), q, false)
		if err != nil {
			return err
		}
		fmt.Println("==", q)
		sort.Slice(r.Result, func(i, j int) bool { return r.Result[i].Metric["rule_group"] < r.Result[j].Metric["rule_group"] })
		for _, s := range r.Result {
			g := s.Metric["rule_group"]
			if i := strings.LastIndex(g, ";"); i >= 0 {
				g = g[i+1:]
			}
			fmt.Printf("   %-40s %v\n", g, s.Value[1])
		}
	}
	if err := lastEvaluations(bed.URL()); err != nil {
		return err
	}
	for _, d := range strings.Split(dashboard, ",") {
		if d == "" {
			continue
		}
		if err := timeDashboard(bed.URL(), d, repeat); err != nil {
			return err
		}
	}
	return timeRules(bed.URL(), ruleFile, repeat)
}

// ruleFile is the rule file Prometheus loads: rules itself, or the first
// of two with the second's groups appended, renamed so that both record
// and alert apart.
func ruleFile(dir, rules string) (string, error) {
	first, second, two := strings.Cut(rules, ",")
	if !two {
		return filepath.Abs(first)
	}
	a, err := os.ReadFile(first)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(second)
	if err != nil {
		return "", err
	}
	renamed := strings.NewReplacer(":layerprobe_", ":before_layerprobe_", "layerprobe:", "before:",
		"alert: Layerprobe", "alert: BeforeLayerprobe", "- name: layerprobe.", "- name: before.").Replace(string(b))
	_, groups, ok := strings.Cut(renamed, "groups:\n")
	if !ok {
		return "", fmt.Errorf("%s: no groups", second)
	}
	out := filepath.Join(dir, "rules-both.yml")
	return out, os.WriteFile(out, []byte(strings.TrimRight(string(a), "\n")+"\n"+groups), 0o644)
}

// backfill writes the history a day at a time (one day's text is what
// the disk holds at once) and backfills it with promtool.
func backfill(ctx context.Context, bed *fleetgen.Bed, rec *fleetgen.Recording, fleet []fleetgen.Host, cfg fleetgen.Config, end time.Time) error {
	for t := cfg.Start; t.Before(end); t = t.Add(24 * time.Hour) {
		c := cfg
		c.Start, c.End = t, t.Add(24*time.Hour)
		if c.End.After(end) {
			c.End = end
		}
		om := filepath.Join(bed.Dir, "day.om")
		out, err := os.Create(om)
		if err != nil {
			return err
		}
		t0 := time.Now()
		n, err := fleetgen.WriteOpenMetrics(out, rec, fleet, c)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		t1 := time.Now()
		if err := bed.BackfillOpenMetrics(ctx, om, 24*time.Hour); err != nil {
			return err
		}
		os.Remove(om)
		fmt.Printf("history from %s: %d samples, generated in %s, backfilled in %s (%.0f samples/s)\n",
			t.Format(time.RFC3339), n, t1.Sub(t0).Round(time.Second), time.Since(t1).Round(time.Second), float64(n)/time.Since(t1).Seconds())
	}
	return os.WriteFile(filepath.Join(bed.Dir, "loaded"), nil, 0o644)
}

type answer struct {
	Result []struct {
		Metric map[string]string `json:"metric"`
		Value  []any             `json:"value"`
	} `json:"result"`
	Stats struct {
		Samples struct {
			Total float64 `json:"totalQueryableSamples"`
		} `json:"samples"`
	} `json:"stats"`
	took time.Duration
}

// query runs an instant query now, or (rng > 0) a range query over the
// last rng at Grafana's step for it.
func query(base, expr string, stats bool, rng ...time.Duration) (*answer, error) {
	q := url.Values{"query": {expr}}
	if stats {
		q.Set("stats", "all")
	}
	path := "/api/v1/query"
	if len(rng) > 0 && rng[0] > 0 {
		now := time.Now()
		step := max(time.Minute, (rng[0] / 1000).Truncate(time.Minute))
		path = "/api/v1/query_range"
		q.Set("start", fmt.Sprint(now.Add(-rng[0]).Unix()))
		q.Set("end", fmt.Sprint(now.Unix()))
		q.Set("step", fmt.Sprint(int(step.Seconds())))
	}
	t0 := time.Now()
	resp, err := http.PostForm(base+path, q)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   answer `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, r.Error)
	}
	r.Data.took = took
	return &r.Data, nil
}

// median runs the query repeat times: the median time and the last answer.
func median(repeat int, f func() (*answer, error)) (time.Duration, *answer, error) {
	var took []time.Duration
	var last *answer
	for i := 0; i < max(1, repeat); i++ {
		r, err := f()
		if err != nil {
			return 0, nil, err
		}
		took, last = append(took, r.took), r
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	return took[len(took)/2], last, nil
}

func lastEvaluations(base string) error {
	resp, err := http.Get(base + "/api/v1/rules")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Name           string  `json:"name"`
				EvaluationTime float64 `json:"evaluationTime"`
				Rules          []struct {
					Name           string  `json:"name"`
					EvaluationTime float64 `json:"evaluationTime"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err
	}
	fmt.Println("== last evaluation of each group and rule (/api/v1/rules)")
	for _, g := range r.Data.Groups {
		fmt.Printf("%-40s %8.1f ms\n", g.Name, g.EvaluationTime*1000)
		for _, ru := range g.Rules {
			fmt.Printf("    %8.1f ms  %s\n", ru.EvaluationTime*1000, ru.Name)
		}
	}
	return nil
}

// timeRules runs every rule's expression alone.
func timeRules(base, file string, repeat int) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var rf struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Record string `yaml:"record"`
				Alert  string `yaml:"alert"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(src, &rf); err != nil {
		return err
	}
	fmt.Println("== each rule's expression alone, instant (median time, samples touched, series answered)")
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			d, a, err := median(repeat, func() (*answer, error) { return query(base, r.Expr, true) })
			if err != nil {
				return err
			}
			fmt.Printf("%-36s %8.1f ms %10.0f samples %6d series  %s%s\n", g.Name, float64(d.Microseconds())/1000,
				a.Stats.Samples.Total, len(a.Result), r.Record, r.Alert)
		}
	}
	return nil
}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr    string `json:"expr"`
		RefID   string `json:"refId"`
		Instant bool   `json:"instant"`
		// Interval is the query's min step ("1h" for an hourly record).
		Interval string `json:"interval"`
	} `json:"targets"`
}

// timeDashboard runs every query of a dashboard, variables at "All", as
// the bench's fleet section does.
func timeDashboard(base, file string, repeat int) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return err
	}
	var panels []panel
	for _, p := range d.Panels {
		panels = append(append(panels, p), p.Panels...)
	}
	vars := regexp.MustCompile(`\$[a-z_]+`)
	for _, rng := range []time.Duration{7 * 24 * time.Hour, 30 * 24 * time.Hour} {
		step := max(time.Minute, (rng / 1000).Truncate(time.Minute))
		subs := map[string]string{"$__rate_interval": "4m", "$__range": fmt.Sprintf("%ds", int(rng.Seconds())),
			"$__interval": fmt.Sprintf("%ds", int(step.Seconds())), "$cluster": ".*", "$job": ".+", "$instance": ".+",
			"$engine": ".+", "$target": "container", "$workload": "fsync"}
		fmt.Printf("== %s, %s (median time, samples touched)\n", file, rng)
		for _, p := range panels {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					continue
				}
				subs := subs
				if tg.Interval != "" {
					// Grafana takes a min step as the scrape interval:
					// $__rate_interval is at least four of it.
					m, err := time.ParseDuration(tg.Interval)
					if err != nil {
						return fmt.Errorf("%s %s: min step: %w", p.Title, tg.RefID, err)
					}
					subs = maps.Clone(subs)
					subs["$__interval"] = fmt.Sprintf("%ds", int(max(step, m).Seconds()))
					subs["$__rate_interval"] = fmt.Sprintf("%ds", int(max(max(step, m)+m, 4*m).Seconds()))
				}
				expr := vars.ReplaceAllStringFunc(tg.Expr, func(v string) string {
					if s, ok := subs[v]; ok {
						return s
					}
					return v
				})
				r := rng
				if tg.Instant {
					r = 0
				}
				dur, a, err := median(repeat, func() (*answer, error) { return query(base, expr, true, r) })
				if err != nil {
					return err
				}
				fmt.Printf("    %8.1f ms %10.0f samples  %s %s\n", float64(dur.Microseconds())/1000, a.Stats.Samples.Total, p.Title, tg.RefID)
			}
		}
	}
	return nil
}
