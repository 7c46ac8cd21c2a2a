package testharness

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Series is one sample of a scrape: its labels and value.
type Series struct {
	Labels map[string]string
	Value  float64
}

// Metrics are the series of a scrape by sample name, as the text format
// names them: a histogram's series are NAME_bucket (with le), NAME_sum and
// NAME_count, a summary's NAME (with quantile), NAME_sum and NAME_count.
type Metrics map[string][]Series

// ParseMetrics reads the Prometheus text exposition format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse exposition: %w", err)
	}
	out := Metrics{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			out.add(name, m)
		}
	}
	return out, nil
}

func (ms Metrics) add(name string, m *dto.Metric) {
	labels := func(extra ...string) map[string]string {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	put := func(n string, v float64, extra ...string) {
		ms[n] = append(ms[n], Series{Labels: labels(extra...), Value: v})
	}
	switch {
	case m.GetGauge() != nil:
		put(name, m.GetGauge().GetValue())
	case m.GetCounter() != nil:
		put(name, m.GetCounter().GetValue())
	case m.GetUntyped() != nil:
		put(name, m.GetUntyped().GetValue())
	case m.GetSummary() != nil:
		s := m.GetSummary()
		for _, q := range s.GetQuantile() {
			put(name, q.GetValue(), "quantile", formatFloat(q.GetQuantile()))
		}
		put(name+"_sum", s.GetSampleSum())
		put(name+"_count", float64(s.GetSampleCount()))
	case m.GetHistogram() != nil:
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			put(name+"_bucket", float64(b.GetCumulativeCount()), "le", formatFloat(b.GetUpperBound()))
		}
		put(name+"_sum", h.GetSampleSum())
		put(name+"_count", float64(h.GetSampleCount()))
	}
}

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Find returns the value of the first series of name whose labels include
// want.
func (ms Metrics) Find(name string, want map[string]string) (float64, bool) {
	for _, s := range ms[name] {
		if matches(s.Labels, want) {
			return s.Value, true
		}
	}
	return 0, false
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Sum adds the values of every series of name.
func (ms Metrics) Sum(name string) float64 {
	var sum float64
	for _, s := range ms[name] {
		sum += s.Value
	}
	return sum
}

// ByLabel maps the values of one label of name's series to their values.
func (ms Metrics) ByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ms[name] {
		out[s.Labels[label]] = s.Value
	}
	return out
}

// Scrape fetches url (a /metrics endpoint) and returns the exposition as
// it came and parsed.
func Scrape(ctx context.Context, client *http.Client, url string) (string, Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	ms, err := ParseMetrics(strings.NewReader(string(b)))
	if err != nil {
		return string(b), nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return string(b), ms, nil
}
