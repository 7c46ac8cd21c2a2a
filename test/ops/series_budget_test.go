package ops

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// seriesBudget is one level's column of the series budget of
// docs/metrics.md ("Series budget"): series per agent = agent + engines ×
// (steady + cold + advisorBase + advisorPerTop × top_n), where top_n is
// capped at advisorCap when the column says min(cap, top_n).
type seriesBudget struct {
	agent, steady, cold, advisorBase, advisorPerTop, advisorCap int
}

func (b seriesBudget) perEngine(topN int) int {
	if b.advisorCap > 0 {
		topN = min(topN, b.advisorCap)
	}
	return b.steady + b.cold + b.advisorBase + b.advisorPerTop*topN
}

func (b seriesBudget) total(engines, topN int) int { return b.agent + engines*b.perEngine(topN) }

// budgetCell is one level's figure: N, or B + P × top_n, or
// B + P × min(C, top_n).
const budgetCell = "(\\d+)(?:\\s*\\+\\s*(\\d+)\\s*×\\s*(?:min\\((\\d+),\\s*top_n\\)|top_n))?"

// budgetRow is a row of the budget table: | `part` | lean | detail | per |.
var budgetRow = regexp.MustCompile("^\\|\\s*`(agent|steady|cold|advisor)`\\s*\\|\\s*" + budgetCell + "\\s*\\|\\s*" + budgetCell + "\\s*\\|")

// readSeriesBudget parses the budget table of docs/metrics.md, the lean
// (default) and the detail column: the test holds the agent to what the
// documentation promises, not to a copy.
func readSeriesBudget(t testing.TB) (lean, detail seriesBudget) {
	t.Helper()
	b, err := os.ReadFile(repoPath("docs/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Series budget\n")
	if !ok {
		t.Fatal("docs/metrics.md has no section \"## Series budget\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	seen := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		m := budgetRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for i, sb := range []*seriesBudget{&lean, &detail} {
			cell := m[2+3*i : 5+3*i] // N, P, C
			n, _ := strconv.Atoi(cell[0])
			switch m[1] {
			case "agent":
				sb.agent = n
			case "steady":
				sb.steady = n
			case "cold":
				sb.cold = n
			case "advisor":
				if cell[1] == "" {
					t.Fatalf("docs/metrics.md: the advisor's budget row must read B + P × top_n: %q", line)
				}
				sb.advisorBase = n
				sb.advisorPerTop, _ = strconv.Atoi(cell[1])
				sb.advisorCap, _ = strconv.Atoi(cell[2])
			}
		}
		seen[m[1]] = true
	}
	for _, part := range []string{"agent", "steady", "cold", "advisor"} {
		if !seen[part] {
			t.Fatalf("docs/metrics.md: the series budget table has no row for `%s` with a lean and a detail column", part)
		}
	}
	return lean, detail
}

// TestSeriesBudgetDocumented: the budget table parses and is consistent
// with the per-engine figures the Cardinality section quotes in words (no
// daemons needed: it runs with -short too).
func TestSeriesBudgetDocumented(t *testing.T) {
	lean, detail := readSeriesBudget(t)
	if detail.advisorPerTop != 3 || detail.advisorBase != 7 || detail.advisorCap != 0 {
		t.Errorf("detail advisor budget %d + %d × top_n (cap %d), want 7 + 3 × top_n (two series per top container, one more for its database; the _other layer sum and six engine gauges)",
			detail.advisorBase, detail.advisorPerTop, detail.advisorCap)
	}
	if lean.advisorPerTop != 3 || lean.advisorBase != 7 || lean.advisorCap != 3 {
		t.Errorf("lean advisor budget %d + %d × min(%d, top_n), want 7 + 3 × min(3, top_n) (metrics.LeanTopN)", lean.advisorBase, lean.advisorPerTop, lean.advisorCap)
	}
	if detail.steady < 235 || detail.cold < 55 {
		t.Errorf("detail: steady %d, cold %d per engine: below what the Cardinality section counts (235, 55)", detail.steady, detail.cold)
	}
	// The promise: the default costs at most 150 series per engine
	// with the default top_n.
	if n := lean.perEngine(budgetTopN); n > 150 {
		t.Errorf("lean budget %d series per engine with top_n %d, want at most 150", n, budgetTopN)
	}
}

// budgetEngines and budgetContainers: the agent of the budget, 3 engines
// and 50 running containers of the user.
const (
	budgetEngines    = 3
	budgetContainers = 50
	budgetTopN       = 10
)

// TestSeriesBudget counts the series a real agent exposes with 3 engines
// and 50 user containers and fails above the budget of docs/metrics.md, at
// both levels: first the lean default, then the same agent restarted with
// --metrics.detail.
//
// Why this is the worst case the budget has to hold, and still cheap: the
// three engines are private overlay2 dockerd daemons (the driver changes
// no label set; vfs and btrfs would only make the cycles slower), measured
// with the smoke profile, one steady and one cold cycle each of six rounds
// (the fewest whose intervals are published), so every steady and cold
// series exists. The 50 containers are idle (what they write changes
// values, never the number of series), and every one runs an image whose
// name the advisor knows as a database with no volume at its data
// directory: the top containers of each engine then all carry the extra
// database series, and the rest fill the `_other` sum, so the advisor's
// share is at its maximum (3 × top_n + 7, top_n capped at 3 in lean).
// The restarted agent restores its results from the state directory and
// makes one more steady and cold cycle of one round each (the window still
// holds six): enough for the advisor's pass and the start-up figures,
// which are not restored, at a fraction of the first cycles' time.
func TestSeriesBudget(t *testing.T) {
	needsSystem(t)
	queue.Parallel(t)
	lean, detail := readSeriesBudget(t)
	bin := agentBinary(t)

	dbImages := []string{"lp-ops/postgres:1", "lp-ops/mysql:1", "lp-ops/redis:1", "lp-ops/mongo:1", "lp-ops/mariadb:1"}
	var engines strings.Builder
	for i := range budgetEngines {
		d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
		docker := testharness.NewDocker(d.Host)
		docker.ImportWorkload(t, dbImages...)
		for c := i; c < budgetContainers; c += budgetEngines {
			docker.RunContainer(t, fmt.Sprintf("db-%02d", c), dbImages[c%len(dbImages)], []string{"idle"})
		}
		fmt.Fprintf(&engines, "  - name: e%d\n    host: %s\n", i, d.Host)
	}
	// The smoke profile with six rounds a steady and a cold cycle (the
	// fewest whose 95% intervals are published: below them the ci_low and
	// ci_high series are withheld), the busy-host guards off (the CI
	// machine is busy), a daily budget (its two series exist), the first
	// cold cycle a minute after the first steady one, and three start-up
	// images as the default has, small ones (the series count the sizes,
	// not their bytes).
	config := func(rounds int, coldInterval string) string {
		return fmt.Sprintf(`profile: smoke
engines:
%sagent:
  interval: 1h
  jitter: 0
  window_rounds: 6
  cold_interval: %s
  cold_rounds: %d
  startup_images: [1MiB, 2MiB, 3MiB]
  daily_byte_budget: 16GiB
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
  budget:
    rounds: %d
advisor:
  metrics_top_n: %d
`, engines.String(), coldInterval, rounds, rounds, budgetTopN)
	}
	files := testharness.MustWriteAgentFiles(t, config(6, "12h"), "ops-budget-token-0123456789abcdef")

	raw, ms := budgetScrape(t, bin, files)
	checkSeriesBudget(t, "lean", lean, raw, ms, 0)
	if t.Failed() {
		return
	}
	// The detail level from the same state: one round a cycle now, and a
	// cold interval shorter than the time since the first agent's cold
	// cycles, so that the restarted agent's first cold cycle comes a
	// minute after its first steady one, not 12 hours after the last.
	if err := os.WriteFile(files.Config, []byte(config(1, "1m")), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, ms = budgetScrape(t, bin, files, "--metrics.detail")
	// LAYERPROBE_RECORD_SCRAPE=FILE keeps this scrape: the fleet test bed's
	// recorded agent output (testdata/agent-scrape.prom) is of the detail
	// level and was made so.
	if p := os.Getenv("LAYERPROBE_RECORD_SCRAPE"); p != "" {
		if err := os.WriteFile(p, []byte(raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkSeriesBudget(t, "detail", detail, raw, ms, 1)
}

// budgetScrape starts the agent with files and extra flags, waits until
// every engine has a successful steady and cold cycle and an advisor pass
// that saw its containers, scrapes it once more and stops it.
func budgetScrape(t *testing.T, bin string, files testharness.AgentFiles, extra ...string) (string, testharness.Metrics) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testharness.MustFreePort(t))
	cmd := exec.Command(bin, files.Args(addr, extra...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LAYERPROBE_LOCK_FILE=" + filepath.Join(files.Dir, "layerprobe.lock")}
	agent, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		agent.Stop(30 * time.Second)
		if t.Failed() {
			t.Logf("agent %v log:\n%s", extra, testharness.Tail(agent.Log.String(), 60))
		}
	}()
	api := testharness.API{Base: "http://" + addr}
	if err := testharness.WaitHTTP(t.Context(), api.Base+"/metrics", time.Minute, agent.Done()); err != nil {
		t.Fatal(err)
	}

	// Every engine has a successful steady and cold cycle, its start-up
	// figures (a cold cycle of this agent: they are not restored) and an
	// advisor pass that saw its containers. The first agent's six cycles
	// take turns under one host lock: about 8 minutes on a quiet machine,
	// 12 under the test suite's load; the restarted agent's one-round
	// cycles a few.
	var ms testharness.Metrics
	testharness.Eventually(t, 20*time.Minute, 3*time.Second, "a steady and a cold cycle and an advisor pass on every engine", func() (bool, string) {
		_, ms = api.Scrape(t)
		var missing []string
		for i := range budgetEngines {
			e := fmt.Sprintf("e%d", i)
			for _, mode := range []string{"steady", "cold"} {
				if _, ok := ms.Find("layerprobe_last_success_timestamp_seconds", map[string]string{"engine": e, "mode": mode}); !ok {
					missing = append(missing, e+"/"+mode)
				}
			}
			if _, ok := ms.Find("layerprobe_startup_seconds_per_byte", map[string]string{"engine": e}); !ok {
				missing = append(missing, e+"/startup")
			}
			if n, ok := ms.Find("layerprobe_containers", map[string]string{"engine": e}); !ok || n < budgetContainers/budgetEngines {
				missing = append(missing, e+"/advisor")
			}
		}
		return len(missing) == 0, fmt.Sprint("missing: ", missing)
	})
	// The cold probe's copy-up figures arrive with the cold cycle's end;
	// one more scrape after every engine's cycles are in.
	time.Sleep(2 * time.Second)
	return api.Scrape(t)
}

// checkSeriesBudget counts one scrape's series per engine and without an
// engine label and fails above the level's budget; detailGauge is the
// value layerprobe_metrics_detail must have.
func checkSeriesBudget(t *testing.T, level string, budget seriesBudget, raw string, ms testharness.Metrics, detailGauge float64) {
	t.Helper()
	total, perEngine, agentWide := 0, map[string]int{}, 0
	perFamily := map[string]int{}
	for name, series := range ms {
		total += len(series)
		perFamily[name] += len(series)
		for _, s := range series {
			if e, ok := s.Labels["engine"]; ok {
				perEngine[e]++
			} else {
				agentWide++
			}
		}
	}
	names := make([]string, 0, len(perFamily))
	for n := range perFamily {
		names = append(names, n)
	}
	sort.Strings(names)
	var report strings.Builder
	for _, n := range names {
		fmt.Fprintf(&report, "  %-55s %d\n", n, perFamily[n])
	}
	want := budget.total(budgetEngines, budgetTopN)
	t.Logf("%s: series: %d (budget %d); per engine %v (budget %d each); without engine label %d (budget %d)\n%s",
		level, total, want, perEngine, budget.perEngine(budgetTopN), agentWide, budget.agent, report.String())

	if v, ok := ms.Find("layerprobe_metrics_detail", nil); !ok || v != detailGauge {
		t.Errorf("%s: layerprobe_metrics_detail %v (present %v), want %v", level, v, ok, detailGauge)
	}
	if len(perEngine) != budgetEngines {
		t.Errorf("%s: series carry %d engine labels, want %d: %v", level, len(perEngine), budgetEngines, perEngine)
	}
	for e, n := range perEngine {
		if n > budget.perEngine(budgetTopN) {
			t.Errorf("%s: engine %s: %d series, above the budget of %d per engine with top_n %d (docs/metrics.md, Series budget)", level, e, n, budget.perEngine(budgetTopN), budgetTopN)
		}
	}
	if agentWide > budget.agent {
		t.Errorf("%s: %d series without an engine label, above the agent's budget of %d (docs/metrics.md, Series budget)", level, agentWide, budget.agent)
	}
	if total > want {
		t.Errorf("%s: %d series, above the budget of %d for %d engines and top_n %d (docs/metrics.md, Series budget)", level, total, want, budgetEngines, budgetTopN)
	}
	// The advisor's share is at its maximum: each engine has more running
	// containers than its top, all databases in their layer.
	top := budgetTopN
	if budget.advisorCap > 0 {
		top = min(top, budget.advisorCap)
	}
	for i := range budgetEngines {
		e := fmt.Sprintf("e%d", i)
		n := 0
		for _, s := range ms["layerprobe_container_database_in_layer"] {
			if s.Labels["engine"] == e {
				n++
			}
		}
		if n != top {
			t.Errorf("%s: engine %s: %d database-in-layer series, want %d (every container is a database in its layer)", level, e, n, top)
		}
	}
	if t.Failed() {
		t.Logf("%s scrape:\n%s", level, testharness.Tail(raw, 80))
	}
}
