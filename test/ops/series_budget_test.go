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

// seriesBudget is the series budget of docs/metrics.md ("Series budget"):
// series per agent = agent + engines × (steady + cold + advisorBase +
// advisorPerTop × top_n).
type seriesBudget struct {
	agent, steady, cold, advisorBase, advisorPerTop int
}

func (b seriesBudget) perEngine(topN int) int {
	return b.steady + b.cold + b.advisorBase + b.advisorPerTop*topN
}

func (b seriesBudget) total(engines, topN int) int { return b.agent + engines*b.perEngine(topN) }

// budgetRow is a row of the budget table: | `part` | N | or | `advisor` | B + P × top_n |.
var budgetRow = regexp.MustCompile("^\\|\\s*`(agent|steady|cold|advisor)`\\s*\\|\\s*(\\d+)(?:\\s*\\+\\s*(\\d+)\\s*×\\s*top_n)?\\s*\\|")

// readSeriesBudget parses the budget table of docs/metrics.md: the test
// holds the agent to what the documentation promises, not to a copy.
func readSeriesBudget(t testing.TB) seriesBudget {
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
	var sb seriesBudget
	seen := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		m := budgetRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		switch m[1] {
		case "agent":
			sb.agent = n
		case "steady":
			sb.steady = n
		case "cold":
			sb.cold = n
		case "advisor":
			if m[3] == "" {
				t.Fatalf("docs/metrics.md: the advisor's budget row must read B + P × top_n: %q", line)
			}
			sb.advisorBase = n
			sb.advisorPerTop, _ = strconv.Atoi(m[3])
		}
		seen[m[1]] = true
	}
	for _, part := range []string{"agent", "steady", "cold", "advisor"} {
		if !seen[part] {
			t.Fatalf("docs/metrics.md: the series budget table has no row for `%s`", part)
		}
	}
	return sb
}

// TestSeriesBudgetDocumented: the budget table parses and is consistent
// with the per-engine figures the Cardinality section quotes in words (no
// daemons needed: it runs with -short too).
func TestSeriesBudgetDocumented(t *testing.T) {
	b := readSeriesBudget(t)
	if b.advisorPerTop != 3 || b.advisorBase != 8 {
		t.Errorf("advisor budget %d + %d × top_n, want 8 + 3 × top_n (two series per top container, one more for its database; the _other sums and six engine gauges)", b.advisorBase, b.advisorPerTop)
	}
	if b.steady < 235 || b.cold < 55 {
		t.Errorf("steady %d, cold %d per engine: below what the Cardinality section counts (235, 55)", b.steady, b.cold)
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
// and 50 user containers and fails above the budget of docs/metrics.md.
//
// Why this is the worst case the budget has to hold, and still cheap: the
// three engines are private overlay2 dockerd daemons (the driver changes
// no label set; vfs and btrfs would only make the cycles slower), measured
// with the smoke profile and two rounds, one steady and one cold cycle
// each, so every steady and cold series exists. The 50 containers are
// idle (what they write changes values, never the number of series), and
// every one runs an image whose name the advisor knows as a database with
// no volume at its data directory: the top_n containers of each engine
// then all carry the extra database series, and the rest fill the
// `_other` sums, so the advisor's share is at its maximum (3 × top_n + 8).
func TestSeriesBudget(t *testing.T) {
	needsSystem(t)
	queue.Parallel(t)
	budget := readSeriesBudget(t)
	bin := agentBinary(t)

	dbImages := []string{"lp-ops/postgres:1", "lp-ops/mysql:1", "lp-ops/redis:1", "lp-ops/mongo:1", "lp-ops/mariadb:1"}
	var engines strings.Builder
	hosts := make([]string, budgetEngines)
	for i := range budgetEngines {
		d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
		hosts[i] = d.Host
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
	cfg := fmt.Sprintf(`profile: smoke
engines:
%sagent:
  interval: 1h
  jitter: 0
  window_rounds: 6
  cold_rounds: 6
  startup_images: [1MiB, 2MiB, 3MiB]
  daily_byte_budget: 16GiB
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
  budget:
    rounds: 6
advisor:
  metrics_top_n: %d
`, engines.String(), budgetTopN)
	files := testharness.MustWriteAgentFiles(t, cfg, "ops-budget-token-0123456789abcdef")
	addr := fmt.Sprintf("127.0.0.1:%d", testharness.MustFreePort(t))
	cmd := exec.Command(bin, files.Args(addr)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LAYERPROBE_LOCK_FILE=" + filepath.Join(files.Dir, "layerprobe.lock")}
	agent, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		agent.Stop(30 * time.Second)
		if t.Failed() {
			t.Logf("agent log:\n%s", testharness.Tail(agent.Log.String(), 60))
		}
	})
	api := testharness.API{Base: "http://" + addr}
	if err := testharness.WaitHTTP(t.Context(), api.Base+"/metrics", time.Minute, agent.Done()); err != nil {
		t.Fatal(err)
	}

	// Every engine has a successful steady and cold cycle and an advisor
	// pass that saw its containers. The six cycles take turns under one
	// host lock: about 8 minutes on a quiet machine, 12 under the test
	// suite's load.
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
			if n, ok := ms.Find("layerprobe_containers", map[string]string{"engine": e}); !ok || n < budgetContainers/budgetEngines {
				missing = append(missing, e+"/advisor")
			}
		}
		return len(missing) == 0, fmt.Sprint("missing: ", missing)
	})
	// The cold probe's copy-up figures arrive with the cold cycle's end;
	// one more scrape after every engine's cycles are in.
	time.Sleep(2 * time.Second)
	raw, ms := api.Scrape(t)
	// LAYERPROBE_RECORD_SCRAPE=FILE keeps this scrape: the fleet test bed's
	// recorded agent output (testdata/agent-scrape.prom) was made so.
	if p := os.Getenv("LAYERPROBE_RECORD_SCRAPE"); p != "" {
		if err := os.WriteFile(p, []byte(raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}

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
	t.Logf("series: %d (budget %d); per engine %v (budget %d each); without engine label %d (budget %d)\n%s",
		total, want, perEngine, budget.perEngine(budgetTopN), agentWide, budget.agent, report.String())

	if len(perEngine) != budgetEngines {
		t.Errorf("series carry %d engine labels, want %d: %v", len(perEngine), budgetEngines, perEngine)
	}
	for e, n := range perEngine {
		if n > budget.perEngine(budgetTopN) {
			t.Errorf("engine %s: %d series, above the budget of %d per engine with top_n %d (docs/metrics.md, Series budget)", e, n, budget.perEngine(budgetTopN), budgetTopN)
		}
	}
	if agentWide > budget.agent {
		t.Errorf("%d series without an engine label, above the agent's budget of %d (docs/metrics.md, Series budget)", agentWide, budget.agent)
	}
	if total > want {
		t.Errorf("%d series, above the budget of %d for %d engines and top_n %d (docs/metrics.md, Series budget)", total, want, budgetEngines, budgetTopN)
	}
	// The advisor's share is at its maximum: each engine has more running
	// containers than top_n, all databases in their layer.
	for i := range budgetEngines {
		e := fmt.Sprintf("e%d", i)
		n := 0
		for _, s := range ms["layerprobe_container_database_in_layer"] {
			if s.Labels["engine"] == e {
				n++
			}
		}
		if n != budgetTopN {
			t.Errorf("engine %s: %d database-in-layer series, want top_n = %d (every container is a database in its layer)", e, n, budgetTopN)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", testharness.Tail(raw, 80))
	}
}
