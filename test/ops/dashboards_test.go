package ops

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// shippedDashboards are the dashboards and their uids. The uids are a
// contract: links, bookmarks and provisioning key on them.
var shippedDashboards = map[string]string{
	"layerprobe-fleet.json": "layerprobe-fleet",
	"layerprobe-host.json":  "layerprobe-host",
}

type dashboard struct {
	file          string
	UID           string          `json:"uid"`
	Title         string          `json:"title"`
	ID            json.RawMessage `json:"id"`
	Editable      bool            `json:"editable"`
	SchemaVersion int             `json:"schemaVersion"`
	Description   string          `json:"description"`
	Tags          []string        `json:"tags"`
	Panels        []panel         `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Inputs json.RawMessage `json:"__inputs"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *dsRef `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit    string `json:"unit"`
			NoValue string `json:"noValue"`
		} `json:"defaults"`
		Overrides []struct {
			Properties []struct {
				ID    string          `json:"id"`
				Value json.RawMessage `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Targets []panelTarget `json:"targets"`
	Panels  []panel       `json:"panels"` // collapsed rows
}

type panelTarget struct {
	Datasource *dsRef `json:"datasource"`
	Expr       string `json:"expr"`
	RefID      string `json:"refId"`
	Instant    bool   `json:"instant"`
	Range      bool   `json:"range"`
	Format     string `json:"format"`
	// Interval is the query's min step (Grafana's "Min step"), for series
	// recorded at a coarser interval than the scrape.
	Interval string `json:"interval"`
}

type variable struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Label      string          `json:"label"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *dsRef          `json:"datasource"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
	Refresh    int             `json:"refresh"`
}

// queryString is the variable's query, in either of Grafana's two forms.
func (v variable) queryString() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// dataPanels are the panels that show data (rows only group them).
func (d dashboard) dataPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Panels...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func loadDashboards(t testing.TB) []dashboard {
	t.Helper()
	files, err := filepath.Glob(repoPath("dashboards/*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var out []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		dec := json.NewDecoder(strings.NewReader(string(b)))
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		d.file = filepath.Base(f)
		names = append(names, d.file)
		out = append(out, d)
	}
	want := make([]string, 0, len(shippedDashboards))
	for f := range shippedDashboards {
		want = append(want, f)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("dashboards/*.json = %v, want %v", names, want)
	}
	return out
}

// allowedPanelTypes are Grafana's core React panels this repository uses;
// Angular panels (graph, singlestat, table-old, the old piechart plugin)
// stop working in Grafana 12.
var allowedPanelTypes = map[string]bool{
	"timeseries": true, "stat": true, "table": true, "bargauge": true, "gauge": true,
	"piechart": true, "state-timeline": true, "status-history": true, "heatmap": true, "barchart": true,
}

var angularPanelTypes = map[string]bool{
	"graph": true, "singlestat": true, "table-old": true, "grafana-piechart-panel": true,
	"grafana-worldmap-panel": true, "natel-discrete-panel": true, "grafana-polystat-panel": true,
}

// knownUnits are Grafana unit ids (packages/grafana-data/src/valueFormats/categories.ts)
// that make sense for layerprobe's base units.
var knownUnits = map[string]bool{
	"none": true, "short": true, "percent": true, "percentunit": true, "s": true, "ms": true, "µs": true,
	"ns": true, "dtdurations": true, "bytes": true, "decbytes": true, "Bps": true, "binBps": true,
	"iops": true, "ops": true, "dateTimeFromNow": true, "dateTimeAsIso": true,
}

var wantVariables = []string{"datasource", "cluster", "job", "instance", "engine"}

func TestDashboardsStructure(t *testing.T) {
	docs := documentedMetrics(t)
	recorded := recordingRuleNames(t)
	uids := map[string]string{}
	titles := map[string]string{}
	for _, d := range loadDashboards(t) {
		t.Run(d.file, func(t *testing.T) {
			if want := shippedDashboards[d.file]; d.UID != want {
				t.Errorf("uid %q, want the stable %q", d.UID, want)
			}
			if len(d.UID) > 40 {
				t.Errorf("uid %q longer than Grafana's 40 characters", d.UID)
			}
			if other, ok := uids[d.UID]; ok {
				t.Errorf("uid %q also used by %s", d.UID, other)
			}
			uids[d.UID] = d.file
			if other, ok := titles[d.Title]; ok || d.Title == "" {
				t.Errorf("title %q empty or also used by %s", d.Title, other)
			}
			titles[d.Title] = d.file
			if string(d.ID) != "null" {
				t.Errorf(`"id" is %s, want null (Grafana assigns it)`, d.ID)
			}
			if d.Editable {
				t.Error(`"editable" is true; dashboards are provisioned from this repository`)
			}
			if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
				t.Errorf("schemaVersion %d: want 36..41 (Grafana 9 to 12, the classic JSON model)", d.SchemaVersion)
			}
			if d.Description == "" || !slices.Contains(d.Tags, "layerprobe") {
				t.Errorf("description %q, tags %v: want a description and the tag layerprobe", d.Description, d.Tags)
			}
			if len(d.Inputs) > 0 {
				t.Error("__inputs (${DS_...}) only resolve in the import UI, not in provisioning; use the datasource variable")
			}
			checkVariables(t, d)
			checkPanels(t, d, docs, recorded)
		})
	}
}

func checkVariables(t *testing.T, d dashboard) {
	t.Helper()
	byName := map[string]variable{}
	var names []string
	for _, v := range d.Templating.List {
		byName[v.Name] = v
		names = append(names, v.Name)
	}
	for _, n := range wantVariables {
		if _, ok := byName[n]; !ok {
			t.Errorf("no %q variable (have %v)", n, names)
		}
	}
	if ds := byName["datasource"]; ds.Type != "datasource" || ds.queryString() != "prometheus" {
		t.Errorf("datasource variable: type %q query %q, want a datasource variable for prometheus", ds.Type, ds.queryString())
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("variable %s: datasource %+v, want ${datasource}", v.Name, v.Datasource)
		}
		q := v.queryString()
		if q == "" || q != v.Definition {
			t.Errorf("variable %s: query %q, definition %q", v.Name, q, v.Definition)
		}
		if !labelValuesRe.MatchString(q) {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q)
		}
		if v.Refresh != 2 {
			t.Errorf("variable %s: refresh %d, want 2 (on time range change)", v.Name, v.Refresh)
		}
		// The cluster's "All" must also match series without the label
		// (a Prometheus that does not tell clusters apart).
		if wantAll := map[bool]string{true: ".*", false: ".+"}[v.Name == "cluster"]; v.IncludeAll && v.AllValue != wantAll {
			t.Errorf("variable %s: allValue %q, want %s (a regex matching every value)", v.Name, v.AllValue, wantAll)
		}
	}
	for _, n := range []string{"cluster", "job", "instance", "engine"} {
		if v := byName[n]; v.Type != "query" {
			t.Errorf("variable %s: type %q, want query", n, v.Type)
		}
	}
	if v := byName["job"]; !v.Multi || !v.IncludeAll {
		t.Errorf("job variable: multi %v includeAll %v, want both", v.Multi, v.IncludeAll)
	}
}

var (
	labelValuesRe = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	rangeVars     = map[string]bool{"$__rate_interval": true, "$__range": true, "$__interval": true}
	// workloadValues must never be matched with the label job: that is the
	// scrape job's; the agent's label is workload.
	workloadValues = regexp.MustCompile(`seqwrite|randwrite|fsync|smallfiles`)
)

func checkPanels(t *testing.T, d dashboard, docs, recorded map[string]bool) {
	t.Helper()
	ids := map[int]bool{}
	type cell struct{ x, y int }
	occupied := map[cell]string{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID <= 0 {
			t.Errorf("panel %q: id %d missing or repeated", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := occupied[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps %q at column %d row %d", p.Title, other, x, y)
				}
				occupied[cell{x, y}] = p.Title
			}
		}
	}
	titles := map[string]bool{}
	for _, p := range d.dataPanels() {
		name := p.Title
		if titles[name] {
			t.Errorf("panel title %q repeated (the end-to-end test names panels by title)", name)
		}
		titles[name] = true
		if angularPanelTypes[p.Type] || !allowedPanelTypes[p.Type] {
			t.Errorf("panel %q: type %q is not an allowed core (non-Angular) panel", name, p.Type)
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want {prometheus ${datasource}}", name, p.Datasource)
		}
		if len(strings.TrimSpace(p.Description)) < 20 {
			t.Errorf("panel %q: description %q too short", name, p.Description)
		}
		if !knownUnits[p.FieldConfig.Defaults.Unit] {
			t.Errorf("panel %q: unit %q is not a known Grafana unit", name, p.FieldConfig.Defaults.Unit)
		}
		for _, o := range p.FieldConfig.Overrides {
			for _, prop := range o.Properties {
				var u string
				if prop.ID == "unit" && (json.Unmarshal(prop.Value, &u) != nil || !knownUnits[u]) {
					t.Errorf("panel %q: override unit %s is not a known Grafana unit", name, prop.Value)
				}
			}
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", name)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			where := name + " " + tg.RefID
			if refs[tg.RefID] || tg.RefID == "" {
				t.Errorf("%s: refId empty or repeated", where)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("%s: query datasource %+v, want ${datasource}", where, tg.Datasource)
			}
			if tg.Instant == tg.Range {
				t.Errorf("%s: instant %v range %v, want exactly one", where, tg.Instant, tg.Range)
			}
			if p.Type == "table" && (!tg.Instant || tg.Format != "table") {
				t.Errorf("%s: a table's query should be instant with format table", where)
			}
			checkExpr(t, where, tg.Expr, docs, recorded, true)
			checkModes(t, where, d.UID+"/"+name+"/"+tg.RefID, tg.Expr)
		}
	}
}

// counterSumRules are the recording rules allowed to sum a counter outside
// rate() or increase(), and the counter: one agent's counters summed over
// modes or targets (or copied, once an hour), which all start again from 0
// together when the agent restarts, so the sum is a counter too (its
// readers take increase() or rate()).
var counterSumRules = map[string]string{
	"engine_result:layerprobe_cycles_total:sum":      "layerprobe_cycles_total",
	"engine:layerprobe_written_bytes_total:sum":      "layerprobe_written_bytes_total",
	"engine_reason:layerprobe_cycle_skips_total:sum": "layerprobe_cycle_skips_total",
	"engine:layerprobe_cycle_skips_total:sum":        "layerprobe_cycle_skips_total",
}

// checkExpr checks one dashboard or rule expression: known metrics only,
// known labels only, workloads matched with workload, counters only
// inside rate() or increase(); for dashboards also the job and instance
// matchers on every selector and Grafana's range variables.
func checkExpr(t *testing.T, where, expr string, docs, recorded map[string]bool, dashboard bool) {
	t.Helper()
	p, err := scanPromQL(expr)
	if err != nil {
		t.Errorf("%s: %v in %q", where, err, expr)
		return
	}
	if len(p.selectors) == 0 && dashboard {
		t.Errorf("%s: no selector in %q", where, expr)
	}
	for _, s := range p.selectors {
		switch {
		case s.name == "ALERTS" && dashboard:
			// Prometheus' own series of pending and firing alerts.
		case docs[s.name], recorded[s.name]:
		case foreignMetrics[s.name] && !dashboard:
		default:
			t.Errorf("%s: %q is neither in docs/metrics.md nor a shipped recording rule", where, s.name)
		}
		for _, m := range s.matchers {
			if !seriesLabels[m.label] {
				t.Errorf("%s: %s matches unknown label %q", where, s.name, m.label)
			}
			if m.label == "job" && workloadValues.MatchString(m.value) {
				t.Errorf("%s: %s{job%s%q}: the workload label is workload", where, s.name, m.op, m.value)
			}
		}
		if strings.HasSuffix(s.name, "_total") && s.enclosing != "rate" && s.enclosing != "increase" && (dashboard || counterSumRules[where] != s.name) {
			t.Errorf("%s: counter %s outside rate()/increase() (in %q)", where, s.name, s.enclosing)
		}
		if dashboard {
			// A fleet aggregate keeps the labels its level names
			// (job_driver_target:...): it is selected by those of the
			// cluster, job and instance it has.
			need := []string{"cluster", "job", "instance"}
			if recorded[s.name] && !strings.Contains(levelOf(s.name), "instance") {
				need = []string{"cluster"}
				if strings.Contains(levelOf(s.name), "job") {
					need = append(need, "job")
				}
			}
			for _, l := range need {
				if !s.has(l, "=~", "$"+l) {
					t.Errorf("%s: %s lacks the %s=~\"$%s\" matcher (it needs %v)", where, s.name, l, l, need)
				}
			}
			if s.rng != "" && !rangeVars[s.rng] {
				t.Errorf("%s: %s[%s]: use $__rate_interval or $__range, not a fixed range", where, s.name, s.rng)
			}
		}
	}
	for _, l := range p.groupLabels {
		if !seriesLabels[l] {
			t.Errorf("%s: grouping by unknown label %q", where, l)
		}
	}
}

// levelOf is the level of a recording rule's name (level:metric:operations),
// the labels its aggregation keeps.
func levelOf(record string) string {
	level, _, _ := strings.Cut(record, ":")
	return level
}

// TestDashboardLinks: data links to another dashboard name a shipped uid and
// pass the variables the target dashboard has.
func TestDashboardLinks(t *testing.T) {
	linkRe := regexp.MustCompile(`/d/([a-z0-9-]+)/[^"?]*\?([^"]*)`)
	byUID := map[string]dashboard{}
	for _, d := range loadDashboards(t) {
		byUID[d.UID] = d
	}
	links := 0
	for _, d := range loadDashboards(t) {
		b, err := os.ReadFile(repoPath("dashboards/" + d.file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRe.FindAllStringSubmatch(string(b), -1) {
			links++
			target, ok := byUID[m[1]]
			if !ok {
				t.Errorf("%s links to unknown dashboard uid %q", d.file, m[1])
				continue
			}
			vars := map[string]bool{}
			for _, v := range target.Templating.List {
				vars[v.Name] = true
			}
			for _, kv := range strings.Split(m[2], "&") {
				if name, ok := strings.CutPrefix(strings.SplitN(kv, "=", 2)[0], "var-"); ok && !vars[name] {
					t.Errorf("%s: link to %s sets var-%s, which it does not have", d.file, m[1], name)
				}
			}
		}
	}
	if links == 0 {
		t.Error("no links between the dashboards (the fleet tables should link hosts to their detail)")
	}
}

// TestSumsOverModesNamesQueries: every exception of sumsOverModes names an
// alert or a dashboard query that exists.
func TestSumsOverModesNamesQueries(t *testing.T) {
	known := map[string]bool{}
	for _, r := range loadRules(t) {
		known[r.Alert] = true
	}
	for _, d := range loadDashboards(t) {
		for _, p := range d.dataPanels() {
			for _, tg := range p.Targets {
				known[d.UID+"/"+p.Title+"/"+tg.RefID] = true
			}
		}
	}
	for k := range sumsOverModes {
		if !known[k] {
			t.Errorf("sumsOverModes names %s, which is no alert or dashboard query", k)
		}
	}
}

// TestDashboardsShowColdResults: the cold probe's results have their
// panels: on the host dashboard the cold fsync overhead next to the steady
// one, copy-up latency, copy-up cost per MiB, reflink and cold cycles; on
// the fleet dashboard the cold overhead and copy-up cost per host.
func TestDashboardsShowColdResults(t *testing.T) {
	type want struct {
		uid, what string
		ok        func(p panel, s selector) bool
	}
	coldOverhead := func(_ panel, s selector) bool {
		return s.name == "layerprobe_overhead_ci_low_ratio" && s.has("mode", "=", "cold") && s.has("workload", "=", "fsync")
	}
	perMiB := func(p panel, s selector) bool {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "layerprobe_copyup_cost_seconds_per_byte") && !strings.Contains(tg.Expr, "* 1048576") {
				return false
			}
		}
		return s.name == "layerprobe_copyup_cost_seconds_per_byte"
	}
	wants := []want{
		{"layerprobe-host", "cold fsync overhead with its interval", coldOverhead},
		{"layerprobe-host", "steady fsync overhead in the same panel as the cold one", nil},
		{"layerprobe-host", "copy-up latency", func(_ panel, s selector) bool { return s.name == "layerprobe_copyup_latency_seconds" }},
		{"layerprobe-host", "copy-up cost per MiB", perMiB},
		{"layerprobe-host", "reflink", func(_ panel, s selector) bool { return s.name == "layerprobe_backing_fs_reflink" }},
		{"layerprobe-host", "cold cycles", func(_ panel, s selector) bool {
			return s.name == "layerprobe_cycles_total" && s.has("mode", "=", "cold")
		}},
		{"layerprobe-fleet", "cold fsync overhead per host", coldOverhead},
		{"layerprobe-fleet", "copy-up cost per MiB per host", perMiB},
	}
	byUID := map[string]dashboard{}
	for _, d := range loadDashboards(t) {
		byUID[d.UID] = d
	}
	for _, w := range wants {
		found := false
		for _, p := range byUID[w.uid].dataPanels() {
			var sels []selector
			for _, tg := range p.Targets {
				ps, err := scanPromQL(tg.Expr)
				if err != nil {
					t.Fatalf("%s/%s: %v", w.uid, p.Title, err)
				}
				sels = append(sels, ps.selectors...)
			}
			if w.ok == nil { // the steady overhead beside the cold one
				cold, steady := false, false
				for _, s := range sels {
					cold = cold || coldOverhead(p, s)
					steady = steady || s.name == "layerprobe_overhead_ci_low_ratio" && s.has("mode", "=~", "steady|")
				}
				found = found || cold && steady
				continue
			}
			for _, s := range sels {
				if w.ok(p, s) {
					found = true
					if strings.Contains(s.name, "copyup") && p.FieldConfig.Defaults.Unit != "s" && p.Type != "table" {
						t.Errorf("%s/%s: unit %q, want s", w.uid, p.Title, p.FieldConfig.Defaults.Unit)
					}
				}
			}
		}
		if !found {
			t.Errorf("%s: no panel shows the %s", w.uid, w.what)
		}
	}
}

// leanSelector says whether a selector reads only series the agent
// exposes at its lean default (docs/metrics.md, "Lean and detail"): of the
// overheads and raw figures only each workload's headline; every other
// family is whole at both levels.
func leanSelector(s selector) bool {
	headline := map[string]string{"seqwrite": "bandwidth", "randwrite": "iops", "fsync": "fsync_p99", "smallfiles": "iops"}
	pinned := func(metric string) bool { // the workload is pinned to one whose headline is metric
		for w, m := range headline {
			if m == metric && s.has("workload", "=", w) {
				return true
			}
		}
		return false
	}
	switch s.name {
	case "layerprobe_overhead_ratio", "layerprobe_overhead_ci_low_ratio", "layerprobe_overhead_ci_high_ratio":
		for _, m := range []string{"bandwidth", "iops", "fsync_p99"} {
			if s.has("metric", "=", m) && pinned(m) {
				return true
			}
		}
		return false
	case "layerprobe_iops":
		return s.has("op", "=", "write") && pinned("iops")
	case "layerprobe_bandwidth_bytes_per_second":
		return s.has("op", "=", "write") && pinned("bandwidth")
	case "layerprobe_latency_seconds":
		return s.has("op", "=", "sync") && s.has("percentile", "=", "99")
	}
	return true
}

// TestDashboardsSayWhatNeedsDetail: a panel that reads a series the lean
// default leaves out says so when it is empty (noValue) and in its
// description, and only such panels do; the alerts and the recording
// rules read lean series only (TestRulesReadLeanSeries).
func TestDashboardsSayWhatNeedsDetail(t *testing.T) {
	const noValue = "needs agent.metrics_detail: true"
	marked := 0
	for _, d := range loadDashboards(t) {
		for _, p := range d.dataPanels() {
			lean := true
			for _, tg := range p.Targets {
				ps, err := scanPromQL(tg.Expr)
				if err != nil {
					t.Fatalf("%s/%s: %v", d.UID, p.Title, err)
				}
				for _, s := range ps.selectors {
					lean = lean && leanSelector(s)
				}
			}
			got := p.FieldConfig.Defaults.NoValue
			switch {
			case !lean && got != noValue:
				t.Errorf("%s/%s reads series of the detail level but its noValue is %q, want %q", d.UID, p.Title, got, noValue)
			case lean && got != "":
				t.Errorf("%s/%s reads lean series only but says %q when empty", d.UID, p.Title, got)
			case !lean && !strings.Contains(p.Description, "agent.metrics_detail: true"):
				t.Errorf("%s/%s: its description does not say what needs agent.metrics_detail: true", d.UID, p.Title)
			}
			if !lean {
				marked++
			}
		}
	}
	if marked == 0 {
		t.Error("no panel reads detail series: the host dashboard's latency percentiles do")
	}
}
