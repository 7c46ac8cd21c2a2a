package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// parseHTML parses a page and returns its elements by tag and class.
func parseHTML(t *testing.T, body string) func(tag, class string) []*html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return func(tag, class string) []*html.Node {
		var out []*html.Node
		var walk func(*html.Node)
		walk = func(n *html.Node) {
			if n.Type == html.ElementNode && n.Data == tag && (class == "" || hasClass(n, class)) {
				out = append(out, n)
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c)
			}
		}
		walk(doc)
		return out
	}
}

func hasClass(n *html.Node, class string) bool {
	for _, a := range n.Attr {
		if a.Key == "class" && strings.Contains(" "+a.Val+" ", " "+class+" ") {
			return true
		}
	}
	return false
}

// The status page shows every non-host target and job of each engine with
// its interval bar, the detector per target and the last cycles, and links
// the machine-readable routes.
func TestStatusPage(t *testing.T) {
	ts := newTestServer(t, nil)
	rec := ts.do("GET", "/", nil, "")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	body := rec.Body.String()
	find := parseHTML(t, body)

	// The fake's default engine has container and volume results for
	// fsync and seqwrite; volume's fsync never paired: no bar.
	rows := find("tr", "overhead-row")
	if len(rows) != 4 {
		t.Fatalf("%d overhead rows, want 4 (container and volume, fsync and seqwrite):\n%s", len(rows), body)
	}
	// container's fsync lost round 3: 5 round pairs, fewer than a 95%
	// interval needs, so its estimate is shown without a bar and marked.
	if bars := find("rect", "ci"); len(bars) != 2 {
		t.Errorf("%d interval bars, want 2 (volume's fsync has no interval, container's is withheld)", len(bars))
	}
	if !strings.Contains(body, "no interval yet") {
		t.Error("the row without an interval does not say so")
	}
	withheld := find("tr", "withheld")
	if len(withheld) != 1 || !strings.Contains(renderNode(t, withheld[0]), `data-target="container" data-workload="fsync" data-withheld="true"`) ||
		!strings.Contains(renderNode(t, withheld[0]), "(no interval yet: 5 of 6 rounds; the next cycle at ") ||
		!strings.Contains(renderNode(t, withheld[0]), "18:00 UTC)") {
		t.Errorf("want container's fsync row marked withheld (5 of 6 rounds; the next cycle at 18:00 UTC), got %d rows", len(withheld))
	}
	for _, want := range []string{`data-target="container"`, `data-workload="fsync"`, "regressed", "learning", "p99 1.04×",
		"running: on fsync, 7 rounds done, 320 MiB written, ends about 12:02 UTC",
		"skipped: host_busy", "Engine btrfs-lab"} {
		if !strings.Contains(body, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	if n := len(find("tr", "cycle")); n != len(ts.src.cycles) {
		t.Errorf("%d cycle rows, want %d", n, len(ts.src.cycles))
	}
	for _, p := range []string{"/metrics", "/api/v1/overhead", "/api/v1/cycles", "/api/v1/engines", "/api/v1/openapi.yaml", "/healthz", "/readyz"} {
		if !strings.Contains(body, `href="`+p+`"`) {
			t.Errorf("status page does not link %s", p)
		}
	}

	// A strict policy: nothing but the page's own style sheet, by hash.
	csp := rec.Header().Get("Content-Security-Policy")
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(body)
	if style == nil {
		t.Fatal("no style sheet")
	}
	sum := sha256.Sum256([]byte(style[1]))
	if want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, want) ||
		!strings.HasPrefix(csp, "default-src 'none';") || strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q, want default-src 'none' and %s", csp, want)
	}
	for _, forbidden := range []string{"<script", " style=", "http://", "https://", "<img", "<link"} {
		if strings.Contains(body, forbidden) {
			t.Errorf("status page contains %q", forbidden)
		}
	}
}

// Everything a Source hands the page is text, however it looks: engine
// names, warnings, cycle messages and reasons are escaped.
func TestStatusPageEscapes(t *testing.T) {
	ts := newTestServer(t, nil)
	const evil = `<script>alert(1)</script>"><img src=x onerror=alert(2)>`
	ts.src.engines[0].Name = evil
	ts.src.engines[0].Warnings = []string{evil}
	ts.src.engines[0].DataRoot = evil
	ts.src.overhead.Engines[0].Engine = evil
	ts.src.cycles[0].Message = evil
	ts.src.cycles[0].Reason = evil
	ts.src.cycles[0].Engine = evil
	body := ts.do("GET", "/", nil, "").Body.String()
	if strings.Contains(body, "<script>") || strings.Contains(body, "<img") {
		t.Fatalf("unescaped input on the status page:\n%s", body)
	}
	if n := strings.Count(body, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 4 {
		t.Errorf("the hostile text appears escaped %d times, want it shown (escaped) in at least 4 places", n)
	}
	// The hostile engine's results still land under it.
	if !strings.Contains(body, `data-engine="&lt;script&gt;`) || len(parseHTML(t, body)("rect", "ci")) != 2 {
		t.Errorf("the engine's results are not shown under its (escaped) name:\n%s", body)
	}
}

// A Source that fails leaves the page up with a notice, never the error's
// text (it may hold host paths).
func TestStatusPageSourceErrors(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.src.err = errors.New("open /var/lib/layerprobe/state.db: permission denied")
	rec := ts.do("GET", "/", nil, "")
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, "could not read engines, overhead, cycles") || strings.Contains(body, "state.db") {
		t.Errorf("GET / with a failing source: %d\n%s", rec.Code, body)
	}
	if !strings.Contains(ts.logText(), "state.db") {
		t.Error("the error is not logged")
	}
}

func TestStatusTableAxis(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tb := statusTableOf(api.EngineOverhead{Engine: "e", Mode: "steady", Window: 6}, now)
	if len(tb.Rows) != 0 || len(tb.Axis) != 0 || tb.LastSuccess != "never" {
		t.Errorf("empty table: %+v; want no rows and no axis", tb)
	}
	// Estimates without their intervals: nothing to draw, no axis; each
	// row says how many rounds it has and when the next cycle comes.
	next := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	withheld := measure.Overhead{N: 4, Withheld: true, PercentOfHost: 103, PercentLow: math.NaN(), PercentHigh: math.NaN()}
	eo := api.EngineOverhead{Engine: "e", Mode: "steady", Window: 48, IntervalRounds: 6, NextCycleAt: &next, Results: []measure.Result{
		{Target: measure.TargetContainer, Workload: measure.Fsync, Overhead: map[string]measure.Overhead{measure.HeadlineMetric(measure.Fsync): withheld}}}}
	tb = statusTableOf(eo, now)
	if len(tb.Axis) != 0 || len(tb.Rows) != 1 || tb.Rows[0].Text != "103% (no interval yet: 4 of 6 rounds; the next cycle at 18:00 UTC)" {
		t.Errorf("withheld rows only: axis %v, rows %+v", tb.Axis, tb.Rows)
	}
	// One interval from 95% to 105%: the axis spans it and the host, not
	// a fixed range.
	eo.Results = append(eo.Results, measure.Result{Target: measure.TargetBind, Workload: measure.Fsync, Overhead: map[string]measure.Overhead{
		measure.HeadlineMetric(measure.Fsync): {N: 12, PercentOfHost: 100, PercentLow: 95, PercentHigh: 105}}})
	tb = statusTableOf(eo, now)
	var first, last float64
	if len(tb.Axis) > 0 {
		fmt.Sscanf(tb.Axis[0].Label, "%f%%", &first)
		fmt.Sscanf(tb.Axis[len(tb.Axis)-1].Label, "%f%%", &last)
	}
	if len(tb.Axis) < 2 || first < 90 || last > 110 {
		t.Errorf("axis %v for an interval from 95%% to 105%%; want ticks within 90%%-110%%", tb.Axis)
	}
	for _, c := range []struct{ lo, hi float64 }{{95, 105}, {0, 400}, {40, 160}, {99, 101}} {
		got := ticks(c.lo, c.hi)
		if len(got) < 2 || len(got) > 6 || got[0] < c.lo || got[len(got)-1] > c.hi {
			t.Errorf("ticks(%v, %v) = %v", c.lo, c.hi, got)
		}
	}
}

// Where the host arm runs is on the page: a quiet line when it joined the
// probe container's CPU cgroups, a red one with the reason when it could
// not, and nothing before the probe container has started.
func TestStatusPageHostArm(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.src.engines[0].HostArmCgroup = "joined"
	ts.src.engines[1].HostArmCgroup = "outside"
	ts.src.engines[1].HostArmCgroupError = "join cgroup /sys/fs/cgroup/cpu/docker/x: read-only file system"
	body := ts.do("GET", "/", nil, "").Body.String()
	if !strings.Contains(body, `data-host-arm="joined"`) {
		t.Errorf("no line for the joined host arm:\n%s", body)
	}
	if !strings.Contains(body, `<p class="bad host-arm" data-host-arm="outside">`) || !strings.Contains(body, "read-only file system") {
		t.Errorf("no red line with the reason for the host arm outside:\n%s", body)
	}
	ts.src.engines[0].HostArmCgroup, ts.src.engines[1].HostArmCgroup = "", ""
	if body := ts.do("GET", "/", nil, "").Body.String(); strings.Contains(body, "data-host-arm") {
		t.Errorf("a host-arm line before any probe container:\n%s", body)
	}
}

// renderNode is n as HTML.
func renderNode(t *testing.T, n *html.Node) string {
	t.Helper()
	var b strings.Builder
	if err := html.Render(&b, n); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
