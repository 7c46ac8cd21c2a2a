package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/stats"
)

// The status page at /: what the agent measured, for a person with a
// browser and no Grafana. Server-rendered HTML with inline SVG bars; no
// script, no external asset. The one inline style sheet is allowed by its
// hash, so the Content-Security-Policy stays as strict as the API's
// otherwise.

//go:embed status.html
var statusHTML string

//go:embed status.css
var statusCSS string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"css": func() template.CSS { return template.CSS(statusCSS) },
}).Parse(statusHTML))

// statusCSP is the policy of the status page: nothing but its own style
// sheet.
var statusCSP = func() string {
	sum := sha256.Sum256([]byte(statusCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
}()

// statusCycles is how many recent cycles the page lists.
const statusCycles = 15

// Geometry of an interval bar, in SVG user units.
const (
	barWidth  = 260.0
	barHeight = 18.0
	barPad    = 6.0 // room at both ends for the estimate's marker
)

type statusPage struct {
	Generated  string
	Confidence string
	Engines    []statusEngine
	Cycles     []statusCycle
	Problem    string // why part of the page is missing
}

type statusEngine struct {
	api.Engine
	Tables   []statusTable
	Detector []statusDetector
}

type statusTable struct {
	Mode        string
	Window      int
	LastSuccess string
	Axis        []statusTick
	Rows        []statusRow
}

type statusTick struct {
	X     float64
	Label string
}

type statusRow struct {
	Target, Workload, Metric string
	Text                     string // "98% [93–103]" or why there is none
	Rounds                   int
	Bar                      *statusBar
	// Withheld: an estimate without its interval (fewer round pairs
	// than a 95% interval needs), marked on the page.
	Withheld bool
}

// statusBar is one interval drawn on its table's axis: x positions of the
// interval's ends, of the estimate and of 100% (the host).
type statusBar struct {
	Low, High, Est, Host float64
	Width, Height, Mid   float64
}

// Span is the interval's width.
func (b statusBar) Span() float64 { return max(b.High-b.Low, 1) }

type statusDetector struct {
	Target string
	api.DetectorState
	Since    string
	Baseline string
}

type statusCycle struct {
	api.Cycle
	Started, Duration, Bytes string
	Outcome                  string // the result with its reason
}

// status serves the status page.
// status serves the page at /. Like /metrics and the health routes it
// ignores query parameters: a browser or a proxy may add some.
func (s *server) status(c *gin.Context) {
	page := s.statusPage(c.Request.Context())
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, page); err != nil {
		s.logger.Error("render the status page", "err", err)
		abortError(c, http.StatusInternalServerError, codeInternal, "internal error; see the agent log")
		return
	}
	c.Header("Content-Security-Policy", statusCSP)
	c.Data(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}

// statusPage gathers what the page shows from the Source. A Source error
// leaves its part out with a notice; its text, which may hold host paths,
// only goes to the log.
func (s *server) statusPage(ctx context.Context) statusPage {
	page := statusPage{Generated: s.now().UTC().Format(time.RFC3339)}
	var problems []string
	engines, err := s.src.Engines(ctx)
	if err != nil {
		s.logger.Error("status page: list engines", "err", err)
		problems = append(problems, "engines")
	}
	ov, err := s.src.Overhead(ctx)
	if err != nil {
		s.logger.Error("status page: overhead", "err", err)
		problems = append(problems, "overhead")
	}
	page.Confidence = fmt.Sprintf("%.0f%%", 100*ov.Confidence)
	for _, e := range engines {
		se := statusEngine{Engine: e}
		for _, eo := range ov.Engines {
			if eo.Engine == e.Name {
				se.Tables = append(se.Tables, statusTableOf(eo, s.now()))
			}
		}
		for _, t := range measure.Targets {
			if st, ok := e.Detector[string(t)]; ok {
				se.Detector = append(se.Detector, statusDetectorOf(string(t), st))
			}
		}
		page.Engines = append(page.Engines, se)
	}
	cycles, err := s.src.Cycles(ctx, CycleQuery{Limit: statusCycles})
	if err != nil {
		s.logger.Error("status page: cycles", "err", err)
		problems = append(problems, "cycles")
	}
	for _, cy := range cycles {
		page.Cycles = append(page.Cycles, statusCycleOf(cy))
	}
	if len(problems) > 0 {
		page.Problem = "could not read " + strings.Join(problems, ", ") + "; see the agent log"
	}
	return page
}

// statusTableOf lays out one engine and mode: a row per target and job
// with the headline metric's interval, on one axis for the whole table.
// The axis spans the intervals drawn (and the host's 100%); a table with
// none draws no axis. A row short of an interval's rounds says how many
// it has and when the next cycle comes.
func statusTableOf(eo api.EngineOverhead, now time.Time) statusTable {
	t := statusTable{Mode: string(eo.Mode), Window: eo.Window, LastSuccess: "never"}
	if eo.LastSuccess != nil {
		t.LastSuccess = eo.LastSuccess.UTC().Format(time.RFC3339)
	}
	need := eo.IntervalRounds
	if need <= 0 {
		need = stats.MinN(measure.DefaultConfidence)
	}
	results := slices.Clone(eo.Results)
	slices.SortFunc(results, func(a, b measure.Result) int {
		if c := measure.CompareWorkloads(a.Workload, b.Workload); c != 0 {
			return c
		}
		return measure.CompareTargets(a.Target, b.Target)
	})
	drawn := func(r measure.Result) (measure.Overhead, bool) {
		o, ok := r.Overhead[measure.HeadlineMetric(r.Workload)]
		return o, ok && r.Target != measure.TargetHost && o.N > 0 && !o.Withheld && finite(o.PercentLow, o.PercentHigh, o.PercentOfHost)
	}
	lo, hi, drew := 100.0, 100.0, false
	for _, r := range results {
		if o, ok := drawn(r); ok {
			lo, hi, drew = min(lo, o.PercentLow), max(hi, o.PercentHigh), true
		}
	}
	// Clamp: one wild interval must not squeeze every other into a line.
	lo, hi = max(lo, 0), min(hi, 400)
	span := hi - lo
	lo, hi = max(lo-0.05*span-1, 0), hi+0.05*span+1
	x := func(p float64) float64 {
		p = min(max(p, lo), hi)
		return barPad + (p-lo)/(hi-lo)*(barWidth-2*barPad)
	}
	if drew {
		for _, v := range ticks(lo, hi) {
			t.Axis = append(t.Axis, statusTick{X: x(v), Label: fmt.Sprintf("%.0f%%", v)})
		}
	}
	next := ""
	if eo.NextCycleAt != nil {
		next = "; the next cycle at " + clockText(*eo.NextCycleAt, now)
	}
	for _, r := range results {
		if r.Target == measure.TargetHost {
			continue
		}
		m := measure.HeadlineMetric(r.Workload)
		row := statusRow{Target: string(r.Target), Workload: string(r.Workload), Metric: m, Rounds: r.RoundsOK,
			Text: "no interval yet" + next}
		o, ok := r.Overhead[m]
		if ok && o.N > 0 && o.Withheld && finite(o.PercentOfHost) {
			// No bar: a bar would be read as the 95% interval.
			row.Text = fmt.Sprintf("%.0f%% (no interval yet: %d of %d rounds%s)", o.PercentOfHost, o.N, need, next)
			row.Withheld = true
		}
		if o, ok := drawn(r); ok {
			row.Text = fmt.Sprintf("%.0f%% [%.0f–%.0f]", o.PercentOfHost, o.PercentLow, o.PercentHigh)
			row.Bar = &statusBar{Low: x(o.PercentLow), High: x(o.PercentHigh), Est: x(o.PercentOfHost), Host: x(100),
				Width: barWidth, Height: barHeight, Mid: barHeight / 2}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// clockText is a time on the page: the clock time in UTC, with the date
// when it is not today's.
func clockText(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04 UTC")
	}
	return t.Format("2 Jan 15:04 UTC")
}

// ticks are round values for an axis from lo to hi: about four of them.
func ticks(lo, hi float64) []float64 {
	step := 1.0
	for _, s := range []float64{1, 2, 5, 10, 20, 25, 50, 100, 200} {
		step = s
		if (hi-lo)/s <= 5 {
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		out = append(out, v)
	}
	return out
}

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

func statusDetectorOf(target string, st api.DetectorState) statusDetector {
	d := statusDetector{Target: target, DetectorState: st, Since: "-", Baseline: "-"}
	if st.Since != nil {
		d.Since = st.Since.UTC().Format(time.RFC3339)
	}
	if st.BaselineRatio != nil && finite(*st.BaselineRatio) {
		d.Baseline = fmt.Sprintf("p99 %.2f× the host's", *st.BaselineRatio)
	}
	return d
}

func statusCycleOf(c api.Cycle) statusCycle {
	sc := statusCycle{Cycle: c, Started: c.StartedAt.UTC().Format(time.RFC3339), Duration: "-",
		Bytes: fmt.Sprintf("%.0f MiB", float64(c.BytesWritten)/(1<<20)), Outcome: c.Result}
	if c.DurationSeconds > 0 {
		sc.Duration = time.Duration(c.DurationSeconds * float64(time.Second)).Round(time.Second).String()
	}
	if c.Reason != "" {
		sc.Outcome += ": " + c.Reason
	}
	if p := c.Running; p != nil {
		sc.Outcome += ": " + progressText(*p)
		sc.Bytes = fmt.Sprintf("%.0f MiB", float64(p.BytesWritten)/(1<<20))
	}
	return sc
}

// progressText says where a running cycle stands: "on fsync, 7 rounds
// done, 320 MiB written, ends about 12:02 UTC".
func progressText(p api.CycleProgress) string {
	s := p.Phase
	if p.Workload != "" {
		s = "on " + string(p.Workload)
	}
	s += fmt.Sprintf(", %d rounds done, %.0f MiB written", p.RoundsDone, float64(p.BytesWritten)/(1<<20))
	if p.EstimatedEnd != nil {
		s += ", ends about " + clockText(*p.EstimatedEnd, p.UpdatedAt)
	}
	return s
}
