package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// The load generator is this test binary started again with loadgenEnv
// set: a second process, so the agent is measured across a real loopback
// connection from outside, not from goroutines sharing the test's scheduler.
const loadgenEnv = "LAYERPROBE_FAULTS_LOADGEN"

// loadSpec is what the load generator is told to do (JSON in loadgenEnv).
type loadSpec struct {
	Groups   []loadGroup   `json:"groups"`
	Duration time.Duration `json:"duration"` // stop after this long...
	MaxTotal int           `json:"max"`      // ...or after this many requests in all
	// Shed counts 503 answers apart instead of as errors (the /metrics
	// handler sheds scrapes beyond its in-flight limit by design).
	Shed bool `json:"shed"`
}

// loadGroup is a number of concurrent clients, each with its own keep-alive
// connection, requesting one URL again and again.
type loadGroup struct {
	URL     string `json:"url"`
	Clients int    `json:"clients"`
}

// loadReport is what it prints on stdout.
type loadReport struct {
	Elapsed time.Duration         `json:"elapsed"`
	Routes  map[string]routeStats `json:"routes"`
}

type routeStats struct {
	Requests   int           `json:"requests"`
	Errors     int           `json:"errors"`
	Shed       int           `json:"shed"`
	FirstError string        `json:"first_error,omitempty"`
	P50        time.Duration `json:"p50"`
	P90        time.Duration `json:"p90"`
	P99        time.Duration `json:"p99"`
	Max        time.Duration `json:"max"`
	Bytes      int64         `json:"bytes"`
}

// loadgenMain runs the load and prints a loadReport. It only talks to
// 127.0.0.1 and is bounded in time and in count.
func loadgenMain() int {
	var spec loadSpec
	if err := json.Unmarshal([]byte(os.Getenv(loadgenEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: bad spec:", err)
		return 2
	}
	clients := 0
	for _, g := range spec.Groups {
		if !strings.HasPrefix(g.URL, "http://127.0.0.1:") {
			fmt.Fprintln(os.Stderr, "loadgen: refusing a target that is not 127.0.0.1:", g.URL)
			return 2
		}
		clients += g.Clients
	}
	if clients < 1 || clients > 256 || spec.Duration <= 0 || spec.Duration > time.Minute ||
		spec.MaxTotal < 1 || spec.MaxTotal > 1_000_000 {
		fmt.Fprintln(os.Stderr, "loadgen: spec out of bounds:", os.Getenv(loadgenEnv))
		return 2
	}
	type obs struct {
		url  string
		lat  time.Duration
		n    int64
		err  string
		shed bool
	}
	ctx, cancel := context.WithTimeout(context.Background(), spec.Duration)
	defer cancel()
	var (
		mu     sync.Mutex
		all    []obs
		issued int
		wg     sync.WaitGroup
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if issued >= spec.MaxTotal {
			return false
		}
		issued++
		return true
	}
	start := time.Now()
	for _, g := range spec.Groups {
		for range g.Clients {
			wg.Go(func() {
				c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
				defer c.CloseIdleConnections()
				var mine []obs
				for ctx.Err() == nil && take() {
					t0 := time.Now()
					o := obs{url: g.URL}
					resp, err := c.Get(g.URL)
					if err == nil {
						o.n, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						switch {
						case err != nil:
						case resp.StatusCode == http.StatusServiceUnavailable && spec.Shed:
							o.shed = true
						case resp.StatusCode != http.StatusOK:
							err = fmt.Errorf("status %s", resp.Status)
						}
					}
					o.lat = time.Since(t0)
					if err != nil {
						o.err = err.Error()
					}
					mine = append(mine, o)
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	rep := loadReport{Elapsed: time.Since(start), Routes: map[string]routeStats{}}
	lats := map[string][]time.Duration{}
	for _, o := range all {
		st := rep.Routes[o.url]
		st.Requests++
		st.Bytes += o.n
		switch {
		case o.err != "":
			st.Errors++
			if st.FirstError == "" {
				st.FirstError = o.err
			}
		case o.shed:
			st.Shed++
		default:
			lats[o.url] = append(lats[o.url], o.lat) // answered requests only
		}
		rep.Routes[o.url] = st
	}
	for u, ls := range lats {
		slices.Sort(ls)
		q := func(p float64) time.Duration { return ls[min(len(ls)-1, int(p*float64(len(ls))))] }
		st := rep.Routes[u]
		st.P50, st.P90, st.P99, st.Max = q(0.50), q(0.90), q(0.99), ls[len(ls)-1]
		rep.Routes[u] = st
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 1
	}
	return 0
}

// runLoad starts the load generator process and returns its report.
func runLoad(t *testing.T, spec loadSpec) loadReport {
	t.Helper()
	b, err := json.Marshal(spec)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), spec.Duration+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), loadgenEnv+"="+string(b))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("load generator: %v\n%s", err, errb.String())
	}
	var rep loadReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("load generator report: %v\n%s", err, out.String())
	}
	return rep
}

// logLoad writes a report's figures to the test log.
func logLoad(t *testing.T, base string, rep loadReport) {
	t.Helper()
	for u, st := range rep.Routes {
		t.Logf("  %-16s %6d requests (%6.0f/s), %d errors, %d shed; answered: p50 %v, p90 %v, p99 %v, max %v; %d KiB per answer",
			strings.TrimPrefix(u, base), st.Requests, float64(st.Requests)/rep.Elapsed.Seconds(), st.Errors, st.Shed,
			st.P50.Round(10*time.Microsecond), st.P90.Round(10*time.Microsecond),
			st.P99.Round(10*time.Microsecond), st.Max.Round(10*time.Microsecond),
			st.Bytes/int64(max(st.Requests-st.Shed, 1))>>10)
	}
}

// /metrics and GET /api/v1/overhead, served to 32 concurrent clients of a
// second process on 127.0.0.1 while a cycle runs fio, for at most 8 s and
// 40000 requests: 8 scrapers (the /metrics handler serves at most 10 scrapes
// at once, docs/metrics.md) and 24 API clients. No error of any kind, a
// bounded p99, and the cycle still succeeds. Then a flood of 32 scrapers
// for 2 s: the scrapes beyond the limit are shed with a quick 503, every
// other one is served, and nothing else fails. The latencies go to the
// test log.
func TestLoadWhileCycleRuns(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	cfg := strings.Replace(baseConfig, "rounds_per_cycle: 1", "rounds_per_cycle: 2", 1)
	s := newAgentSetup(t, d.Host, cfg)
	s.logLevel = "info" // debug would log every request
	a := s.start(t)

	// A first cycle, so both routes serve full answers.
	a.trigger(t, 30*time.Second)
	first := a.newCycle(t, 0, 2*time.Minute)
	if first.Result != "ok" {
		t.Fatalf("first cycle: %+v", first)
	}
	a.trigger(t, 30*time.Second)
	running := a.runningCycle(t, time.Minute)
	waitFioJob(t, d.DataRoot, false, time.Minute)

	metricsURL, overheadURL := a.base+"/metrics", a.base+"/api/v1/overhead"
	spec := loadSpec{Groups: []loadGroup{{metricsURL, 8}, {overheadURL, 24}}, Duration: 8 * time.Second, MaxTotal: 40000}
	loadStart := time.Now()
	rep := runLoad(t, spec)
	loadEnd := time.Now()
	total := 0
	for _, g := range spec.Groups {
		st := rep.Routes[g.URL]
		total += st.Requests
		route := strings.TrimPrefix(g.URL, a.base)
		// Throughput is this machine's, not the agent's: the assertions
		// are that it keeps serving, without errors, in bounded time.
		if st.Requests < 20 {
			t.Errorf("%s: only %d requests served in %s", route, st.Requests, rep.Elapsed)
		}
		if st.Errors > 0 {
			t.Errorf("%s: %d errors under load, first: %s", route, st.Errors, st.FirstError)
		}
		if st.P99 > 5*time.Second {
			t.Errorf("%s: p99 %v under load, want below 5s", route, st.P99)
		}
	}
	t.Logf("load during cycle #%d: 32 clients (8 on /metrics, 24 on /api/v1/overhead), %d requests in %s:",
		running.ID, total, rep.Elapsed.Round(time.Millisecond))
	logLoad(t, a.base, rep)

	// A flood of scrapers beyond the handler's limit.
	flood := runLoad(t, loadSpec{Groups: []loadGroup{{metricsURL, 32}}, Duration: 2 * time.Second, MaxTotal: 20000, Shed: true})
	st := flood.Routes[metricsURL]
	// Shedding must not starve scrapers: at least the in-flight limit's
	// worth are served.
	if st.Errors > 0 || st.Requests-st.Shed < 10 {
		t.Errorf("/metrics flood: %d requests, %d errors (first: %s), %d shed; want no error and at least 10 served",
			st.Requests, st.Errors, st.FirstError, st.Shed)
	}
	t.Logf("flood: 32 scrapers for 2 s, %d shed with 503 (limit: 10 scrapes in flight):", st.Shed)
	logLoad(t, a.base, flood)

	// The load overlapped the cycle, and the cycle did not suffer from it.
	c := a.newCycle(t, running.ID-1, 2*time.Minute)
	end := loadEnd
	if c.FinishedAt.Before(end) {
		end = c.FinishedAt
	}
	if c.ID != running.ID || c.Result != "ok" || !c.FinishedAt.After(loadStart) {
		t.Errorf("cycle under load: %+v (load %s to %s); want #%d ok, finished after the load began",
			c, loadStart.Format(time.RFC3339Nano), loadEnd.Format(time.RFC3339Nano), running.ID)
	}
	t.Logf("cycle #%d ran %.1f s and overlapped the load for %.1f s", c.ID, c.FinishedAt.Sub(c.StartedAt).Seconds(), end.Sub(loadStart).Seconds())
	if log := a.Log.String(); strings.Contains(log, "panic") || strings.Contains(log, "level=ERROR") {
		t.Errorf("agent logged errors under load:\n%s", grepLines(log, "panic", "level=ERROR"))
	}
	if code, _ := a.get(t, "/healthz"); code != 200 {
		t.Errorf("/healthz after the load: %d", code)
	}
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}
