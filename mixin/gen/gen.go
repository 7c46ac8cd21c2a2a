// Command gen builds layerprobe's dashboards, Prometheus rules and their
// Kubernetes and Helm forms from the monitoring mixin (mixin/*.libsonnet)
// with its default _config, and writes them where the repository keeps
// them. `make mixin` runs it; its test fails when a checked-in file
// differs from what it builds.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-jsonnet"
	"go.yaml.in/yaml/v3"
)

// Where the outputs go, relative to the repository root.
const (
	dashboardsDir  = "dashboards"
	rulesFile      = "deploy/prometheus/layerprobe-rules.yml"
	rawRatioFile   = "deploy/prometheus/layerprobe-raw-ratio-rules.yml"
	prometheusRule = "deploy/kubernetes/prometheus-operator/prometheusrule.yaml"
	chartDir       = "deploy/helm/layerprobe"
)

// generatedNote heads every YAML output.
const generatedNote = "# Generated from mixin/ (make mixin): edit the jsonnet there, not this file.\n"

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	files, err := build(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixin:", err)
		os.Exit(1)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(*root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "mixin:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mixin:", err)
			os.Exit(1)
		}
	}
}

// mixinOutput is what the jsonnet evaluates to.
type mixinOutput struct {
	Dashboards map[string]any `json:"dashboards"`
	Rules      ruleFile       `json:"rules"`
	Alerts     ruleFile       `json:"alerts"`
	RawRatios  ruleFile       `json:"rawRatios"`
}

type ruleFile struct {
	Groups []any `json:"groups"`
}

// build evaluates the mixin under root/mixin and returns every output file
// by its path relative to root.
func build(root string) (map[string][]byte, error) {
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{filepath.Join(root, "mixin")}})
	out, err := vm.EvaluateAnonymousSnippet("gen", `local m = import 'mixin.libsonnet';
{ dashboards: m.grafanaDashboards, rules: m.prometheusRules, alerts: m.prometheusAlerts,
  rawRatios: m.prometheusRawRatioRules }`)
	if err != nil {
		return nil, fmt.Errorf("evaluate the mixin: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber() // 54000 stays 54000, not 5.4e+04
	var m mixinOutput
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("read the mixin's output: %w", err)
	}
	if len(m.Dashboards) == 0 || len(m.Rules.Groups)+len(m.Alerts.Groups) == 0 {
		return nil, errors.New("the mixin has no dashboards or no rules")
	}

	files := map[string][]byte{}
	for name, d := range m.Dashboards {
		b, err := marshalJSON(d)
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", name, err)
		}
		files[filepath.Join(dashboardsDir, name)] = b
		// The chart ships the dashboards too, for Grafana's sidecar.
		files[filepath.Join(chartDir, "files", "dashboards", name)] = b
	}

	groups := map[string]any{"groups": append(slices.Clone(m.Rules.Groups), m.Alerts.Groups...)}
	rules, err := marshalYAML(groups)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	files[rulesFile] = append([]byte(generatedNote+rulesHeader), rules...)
	files[filepath.Join(chartDir, "files", "layerprobe-rules.yml")] = append([]byte(generatedNote), rules...)

	// The raw ratios to the host are a file of their own, loaded only by
	// whoever wants them: nothing the mixin ships reads them, and over a
	// fleet they are the costliest rules.
	raw, err := marshalYAML(map[string]any{"groups": m.RawRatios.Groups})
	if err != nil {
		return nil, fmt.Errorf("raw ratio rules: %w", err)
	}
	files[rawRatioFile] = append([]byte(generatedNote+rawRatioHeader), raw...)

	pr, err := marshalYAML(map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":      "layerprobe",
			"namespace": "layerprobe",
			"labels": map[string]any{
				"app.kubernetes.io/name":      "layerprobe",
				"app.kubernetes.io/component": "agent",
			},
		},
		"spec": groups,
	})
	if err != nil {
		return nil, fmt.Errorf("PrometheusRule: %w", err)
	}
	files[prometheusRule] = append([]byte(generatedNote+prometheusRuleHeader), pr...)
	return files, nil
}

const rulesHeader = `#
# Prometheus recording and alerting rules for layerprobe:
#
#   rule_files: [/etc/prometheus/rules/layerprobe-rules.yml]
#
# Checked with ` + "`promtool check rules --lint=all --lint-fatal`" + ` and unit-tested
# with ` + "`promtool test rules tests/layerprobe-rules_test.yml`" + ` (Prometheus >=
# 2.42). Every alert links its section of docs/runbook.md. They assume the
# default 6h cycle interval; mixin/config.libsonnet holds the interval, the
# thresholds and the for: durations (docs/runbook.md#assumptions-and-tuning).
`

const rawRatioHeader = `#
# Optional recording rules: every raw figure of a target divided by the
# host's (target:<metric>:ratio_to_host), for the figures the agent does not
# pair itself (reads, p99.9). Nothing in layerprobe-rules.yml or the
# dashboards reads them; over a large fleet they are the costliest rules
# (docs/fleet.md). They need the agents' agent.metrics_detail: true: the
# lean default exposes only each workload's headline raw figure, so most of
# them record nothing there. Load them beside the main file when you want
# them:
#
#   rule_files:
#     - /etc/prometheus/rules/layerprobe-rules.yml
#     - /etc/prometheus/rules/layerprobe-raw-ratio-rules.yml
`

const prometheusRuleHeader = `#
# The rules of deploy/prometheus/layerprobe-rules.yml for the Prometheus
# Operator. Its Prometheus selects PrometheusRules by label
# (spec.ruleSelector); add the label yours expects, e.g. release: <name> for
# kube-prometheus-stack.
`

// marshalJSON writes v as Grafana exports dashboards: two-space indent,
// no HTML escaping, a final newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// keyOrder puts the keys people read first in Prometheus rules and
// Kubernetes objects first; the rest follow alphabetically.
var keyOrder = []string{"apiVersion", "kind", "metadata", "spec", "name", "namespace", "interval", "groups", "rules",
	"record", "alert", "expr", "for", "labels", "annotations", "summary", "description", "runbook_url"}

// marshalYAML writes v (maps, slices, strings, json.Number, bools) as
// YAML with keyOrder and multi-line strings as literal blocks.
func marshalYAML(v any) ([]byte, error) {
	n, err := toNode(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func toNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Collect(maps.Keys(v))
		slices.SortFunc(keys, func(a, b string) int {
			ia, ib := slices.Index(keyOrder, a), slices.Index(keyOrder, b)
			switch {
			case ia >= 0 && ib >= 0:
				return ia - ib
			case ia >= 0:
				return -1
			case ib >= 0:
				return 1
			}
			return strings.Compare(a, b)
		})
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range keys {
			val, err := toNode(v[k])
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, val)
		}
		return n, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			en, err := toNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, en)
		}
		return n, nil
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if strings.Contains(v, "\n") {
			n.Style = yaml.LiteralStyle
		}
		return n, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(v), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}, nil
	}
	return nil, fmt.Errorf("cannot write %T as YAML", v)
}
