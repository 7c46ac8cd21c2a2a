package ops

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// selector is one vector selector of a PromQL expression: a metric name
// with its label matchers, and the function or aggregation it sits in.
type selector struct {
	name     string
	matchers []matcher
	// enclosing is the innermost function the selector is an argument of
	// ("" at the top level or inside plain parentheses).
	enclosing string
	// rng is the range of a range selector ("5m", "$__rate_interval"), or "".
	rng string
}

type matcher struct {
	label, op, value string
}

func (s selector) has(label, op, value string) bool {
	return slices.Contains(s.matchers, matcher{label, op, value})
}

// parsedExpr is what scanPromQL finds in an expression.
type parsedExpr struct {
	selectors []selector
	// groupLabels are the labels named in by, without, on, ignoring,
	// group_left and group_right lists.
	groupLabels []string
	// functions are the functions and aggregations called.
	functions []string
}

var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
}

var aggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
}

var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// scanPromQL is a small PromQL scanner: enough to find the metric names,
// label matchers, grouping labels and functions of the expressions this
// repository ships (Grafana variables such as $job appear only inside
// strings and ranges). It is not a full parser; the real Prometheus in the
// end-to-end test parses and runs every expression too.
func scanPromQL(expr string) (parsedExpr, error) {
	var p parsedExpr
	type frame struct{ fn string }
	var stack []frame
	i := 0
	n := len(expr)
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(j int) int {
		for j < n && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n' || expr[j] == '\r') {
			j++
		}
		return j
	}
	readString := func(j int) (string, int, error) {
		q := expr[j]
		var b strings.Builder
		for k := j + 1; k < n; k++ {
			c := expr[k]
			if c == '\\' && k+1 < n {
				b.WriteByte(expr[k+1])
				k++
				continue
			}
			if c == q {
				return b.String(), k + 1, nil
			}
			b.WriteByte(c)
		}
		return "", n, fmt.Errorf("unterminated string at %d", j)
	}
	readMatchers := func(j int) ([]matcher, int, error) {
		// expr[j] == '{'
		var ms []matcher
		j++
		for {
			j = skipSpace(j)
			if j >= n {
				return nil, j, fmt.Errorf("unterminated matcher list")
			}
			if expr[j] == '}' {
				return ms, j + 1, nil
			}
			if expr[j] == ',' {
				j++
				continue
			}
			k := j
			for k < n && isIdent(expr[k]) {
				k++
			}
			if k == j {
				return nil, j, fmt.Errorf("bad matcher at %d: %q", j, expr[j:min(n, j+20)])
			}
			label := expr[j:k]
			k = skipSpace(k)
			op := ""
			for _, cand := range []string{"=~", "!~", "!=", "="} {
				if strings.HasPrefix(expr[k:], cand) {
					op = cand
					break
				}
			}
			if op == "" {
				return nil, k, fmt.Errorf("bad matcher operator at %d", k)
			}
			k = skipSpace(k + len(op))
			if k >= n || expr[k] != '"' && expr[k] != '\'' {
				return nil, k, fmt.Errorf("matcher value is not a string at %d", k)
			}
			v, next, err := readString(k)
			if err != nil {
				return nil, k, err
			}
			ms = append(ms, matcher{label, op, v})
			j = next
		}
	}
	currentFn := func() string {
		if len(stack) == 0 {
			return ""
		}
		return stack[len(stack)-1].fn
	}
	for i < n {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			_, next, err := readString(i)
			if err != nil {
				return p, err
			}
			i = next
		case c == '#':
			for i < n && expr[i] != '\n' {
				i++
			}
		case c == '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return p, fmt.Errorf("unterminated range at %d", i)
			}
			rng := expr[i+1 : i+j]
			if k := len(p.selectors) - 1; k >= 0 && p.selectors[k].rng == "" && strings.TrimSpace(expr[:i]) != "" {
				p.selectors[k].rng = rng
			}
			i += j + 1
		case c == '(':
			stack = append(stack, frame{""})
			i++
		case c == ')':
			if len(stack) == 0 {
				return p, fmt.Errorf("unbalanced ) at %d", i)
			}
			stack = stack[:len(stack)-1]
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < n && expr[i+1] >= '0' && expr[i+1] <= '9':
			for i < n && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case c == '{':
			ms, next, err := readMatchers(i)
			if err != nil {
				return p, err
			}
			p.selectors = append(p.selectors, selector{name: "", matchers: ms, enclosing: currentFn()})
			i = next
		case isIdentStart(c):
			j := i
			for j < n && isIdent(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := skipSpace(j)
			lw := strings.ToLower(word)
			switch {
			case labelListKeywords[lw]:
				if k < n && expr[k] == '(' {
					end := strings.IndexByte(expr[k:], ')')
					if end < 0 {
						return p, fmt.Errorf("unterminated label list after %s", word)
					}
					for _, l := range strings.Split(expr[k+1:k+end], ",") {
						if l = strings.TrimSpace(l); l != "" {
							p.groupLabels = append(p.groupLabels, l)
						}
					}
					i = k + end + 1
				} else {
					i = j
				}
			case promqlKeywords[lw]:
				i = j
			case aggregations[lw] && (strings.HasPrefix(expr[k:], "by") || strings.HasPrefix(expr[k:], "without")):
				// sum by (labels) (expr): the label list first, then the argument.
				m := k
				for m < n && isIdent(expr[m]) {
					m++
				}
				m = skipSpace(m)
				if m >= n || expr[m] != '(' {
					return p, fmt.Errorf("label list expected after %s at %d", expr[k:m], m)
				}
				end := strings.IndexByte(expr[m:], ')')
				if end < 0 {
					return p, fmt.Errorf("unterminated label list after %s", word)
				}
				for _, l := range strings.Split(expr[m+1:m+end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						p.groupLabels = append(p.groupLabels, l)
					}
				}
				m = skipSpace(m + end + 1)
				if m >= n || expr[m] != '(' {
					return p, fmt.Errorf("argument expected after %s's label list at %d", word, m)
				}
				p.functions = append(p.functions, word)
				stack = append(stack, frame{word})
				i = m + 1
			case k < n && expr[k] == '(':
				p.functions = append(p.functions, word)
				stack = append(stack, frame{word})
				i = k + 1
			default:
				sel := selector{name: word, enclosing: currentFn()}
				if k < n && expr[k] == '{' {
					ms, next, err := readMatchers(k)
					if err != nil {
						return p, err
					}
					sel.matchers = ms
					j = next
				}
				p.selectors = append(p.selectors, sel)
				i = j
			}
		default:
			i++
		}
	}
	if len(stack) != 0 {
		return p, fmt.Errorf("unbalanced (")
	}
	return p, nil
}

// documentedMetrics are the metric names docs/metrics.md lists: the agent's
// contract and the only layerprobe_ names dashboards and rules may use.
func documentedMetrics(t testing.TB) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(repoPath("docs/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("`(layerprobe_[a-z0-9_]+)`").FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	if len(out) < 15 {
		t.Fatalf("docs/metrics.md names only %d layerprobe_ metrics: %v", len(out), out)
	}
	return out
}

// seriesLabels are the label names a scraped layerprobe series can carry in
// Prometheus (the agent's labels plus the target labels, cluster among them
// where the scrape adds it) and the labels of ALERTS. exported_job is not
// one of them: the agent has no job label of its own.
var seriesLabels = map[string]bool{
	"job": true, "instance": true, "engine": true, "driver": true, "target": true, "workload": true, "cluster": true,
	"metric": true, "op": true, "percentile": true, "result": true, "reason": true, "backing_fs": true,
	"engine_version": true, "data_root": true, "fio_version": true, "version": true, "revision": true,
	"goversion": true, "alertname": true, "alertstate": true, "severity": true,
	"mode": true, "size_bytes": true, "image_bytes": true, "container": true, "image": true, "database": true,
	"lookup": true,
	// The fleet recording rules: the host name an instance's port left
	// out, node_exporter's kernel release joined on it, and the quantile of
	// a distribution over the fleet.
	"host": true, "release": true, "quantile": true,
}

// foreignMetrics are series of other exporters the rules may read: the
// fleet rules join node_exporter's kernel release to each host.
var foreignMetrics = map[string]bool{"node_uname_info": true}

// modeMetrics are the series that carry the mode label (docs/metrics.md):
// "steady" for the scheduled cycles, "cold" for the cold probe. Absent on
// agents from before the label.
var modeMetrics = map[string]bool{
	"layerprobe_overhead_ratio": true, "layerprobe_overhead_ci_low_ratio": true, "layerprobe_overhead_ci_high_ratio": true,
	"layerprobe_iops": true, "layerprobe_bandwidth_bytes_per_second": true, "layerprobe_latency_seconds": true,
	"layerprobe_cycles_total": true, "layerprobe_cycle_duration_seconds": true, "layerprobe_last_success_timestamp_seconds": true,
}

// coldMetrics exist only where the cold probe has run.
var coldMetrics = map[string]bool{
	"layerprobe_copyup_latency_seconds": true, "layerprobe_copyup_cost_seconds_per_byte": true, "layerprobe_backing_fs_reflink": true,
	"layerprobe_startup_seconds": true, "layerprobe_startup_device_written_bytes": true,
	"layerprobe_startup_seconds_per_byte": true, "layerprobe_startup_written_bytes_per_image_byte": true,
	"layerprobe_lookup_seconds": true, "layerprobe_lookup_extra_seconds": true,
	"layerprobe_lookup_extra_ci_low_seconds": true, "layerprobe_lookup_extra_ci_high_seconds": true,
}

// The two mode selections the rules and dashboards use: steady state
// (which also matches agents from before the mode label, whose series have
// no mode at all) and the cold probe.
var (
	steadyMatcher = matcher{"mode", "=~", "steady|"}
	coldMatcher   = matcher{"mode", "=", "cold"}
)

// sumsOverModes are the alerts and dashboard queries (uid/title/refId)
// that read a mode-carrying series without selecting a mode, on purpose.
var sumsOverModes = map[string]string{
	"LayerprobeCyclesFailing":                    "failed steady and cold cycles count together",
	"layerprobe-fleet/Agent health per engine/C": "ok cycles of both modes: the table's cycle counts are the agent's health",
	"layerprobe-fleet/Agent health per engine/D": "failed cycles of both modes, like LayerprobeCyclesFailing",
}

// readsCold says whether an expression reads results of the cold probe.
func readsCold(p parsedExpr) bool {
	for _, s := range p.selectors {
		if coldMetrics[s.name] || s.has(coldMatcher.label, coldMatcher.op, coldMatcher.value) {
			return true
		}
	}
	return false
}

// checkModes: every selector of a mode-carrying series selects steady
// state or the cold probe, with one of the two shared matchers, unless the
// expression is listed in sumsOverModes. Steady panels and alerts must
// never see cold results.
func checkModes(t *testing.T, where, key, expr string) {
	t.Helper()
	p, err := scanPromQL(expr)
	if err != nil {
		return // checkExpr reports it
	}
	for _, s := range p.selectors {
		if !modeMetrics[s.name] {
			continue
		}
		var modes []matcher
		for _, m := range s.matchers {
			if m.label == "mode" {
				modes = append(modes, m)
			}
		}
		switch {
		case len(modes) == 0 && sumsOverModes[key] == "":
			t.Errorf("%s: %s selects no mode: steady and cold results would mix (add %s%s%q or %s%s%q)",
				where, s.name, steadyMatcher.label, steadyMatcher.op, steadyMatcher.value, coldMatcher.label, coldMatcher.op, coldMatcher.value)
		case len(modes) > 0 && sumsOverModes[key] != "":
			t.Errorf("%s: listed in sumsOverModes but %s selects a mode", where, s.name)
		case len(modes) > 1 || len(modes) == 1 && modes[0] != steadyMatcher && modes[0] != coldMatcher:
			t.Errorf("%s: %s: mode matchers %v, want exactly one of %v and %v", where, s.name, modes, steadyMatcher, coldMatcher)
		}
	}
}

func TestScanPromQL(t *testing.T) {
	p, err := scanPromQL(`sum by (job, instance) (rate(layerprobe_written_bytes_total{job=~"$job", instance=~"$instance"}[$__rate_interval]))
	  / ignoring (target) group_left () layerprobe_iops{target="host", op!~"a,b"} or vector(0) > 0.5`)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.selectors) != 2 || p.selectors[0].name != "layerprobe_written_bytes_total" || p.selectors[0].enclosing != "rate" ||
		p.selectors[0].rng != "$__rate_interval" || !p.selectors[0].has("job", "=~", "$job") ||
		p.selectors[1].name != "layerprobe_iops" || !p.selectors[1].has("op", "!~", "a,b") || p.selectors[1].enclosing != "" {
		t.Errorf("selectors: %+v", p.selectors)
	}
	if !slices.Equal(p.groupLabels, []string{"job", "instance", "target"}) {
		t.Errorf("group labels: %v", p.groupLabels)
	}
	if !slices.Equal(p.functions, []string{"sum", "rate", "vector"}) {
		t.Errorf("functions: %v", p.functions)
	}
	if _, err := scanPromQL(`rate(x{a="b"}[5m]`); err == nil {
		t.Error("unbalanced parenthesis not reported")
	}
}
