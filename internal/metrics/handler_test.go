package metrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/layerprobe/layerprobe/internal/version"
)

// scrape GETs /metrics from a real HTTP server the way Prometheus would
// (no Accept header: the text format) and returns the body.
func scrape(t testing.TB, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body
}

func parse(t testing.TB, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return mfs
}

// bufLogger collects what Handler logs, so tests can require silence.
func bufLogger() (*slog.Logger, *testharness.Buffer) {
	var b testharness.Buffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

// The real linter Prometheus users run, on a real scrape of the whole
// endpoint (Go, process and promhttp series included).
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found; CI must run this test (apt-get install prometheus)")
		}
		t.Skip("promtool not found (Debian: apt-get install prometheus)")
	}
	logger, logs := bufLogger()
	srv := httptest.NewServer(Handler(NewRegistry(staticSource{fullSnapshot()}, true), logger))
	defer srv.Close()
	// Twice: the second scrape also carries the promhttp self-metrics with
	// non-zero values.
	scrape(t, srv.URL)
	body := scrape(t, srv.URL)
	if !bytes.Contains(body, []byte("layerprobe_overhead_ratio{")) || !bytes.Contains(body, []byte("go_goroutines ")) {
		t.Fatalf("scrape lacks expected series:\n%s", body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if l := logs.String(); l != "" {
		t.Fatalf("handler logged errors on a good snapshot:\n%s", l)
	}
}

// Many scrapes race with the agent swapping snapshots (run with -race).
// Every snapshot carries one generation number in all of its values, so a
// scrape that mixed two snapshots shows two different numbers.
func TestConcurrentScrapesWhileSwapping(t *testing.T) {
	gen := func(n int) *Snapshot {
		s := fullSnapshot()
		v := float64(n)
		for i := range s.Engines[0].Raw {
			s.Engines[0].Raw[i].IOPS = v
		}
		for i := range s.Engines {
			s.Engines[i].CyclesTotal = map[string]float64{"ok": v}
			s.Engines[i].ColdCyclesTotal = map[string]float64{"ok": v}
		}
		if n%2 == 1 {
			// Engines come and go between cycles too.
			s.Engines = s.Engines[:1]
		}
		return s
	}
	src := &swapSource{}
	src.p.Store(gen(0))
	reg := NewRegistry(src, true)
	logger, logs := bufLogger()
	srv := httptest.NewServer(Handler(reg, logger))
	defer srv.Close()

	stop := make(chan struct{})
	var swapper sync.WaitGroup
	var swaps atomic.Int64
	swapper.Go(func() {
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			src.p.Store(gen(n))
			swaps.Add(1)
			time.Sleep(50 * time.Microsecond)
		}
	})

	check := func(mfs []*dto.MetricFamily) error {
		seen := map[float64]bool{}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "layerprobe_iops":
				for _, m := range mf.GetMetric() {
					seen[m.GetGauge().GetValue()] = true
				}
			case "layerprobe_cycles_total":
				for _, m := range mf.GetMetric() {
					if slices.ContainsFunc(m.GetLabel(), func(lp *dto.LabelPair) bool {
						return lp.GetName() == "result" && lp.GetValue() == "ok"
					}) {
						seen[m.GetCounter().GetValue()] = true
					}
				}
			}
		}
		if len(seen) != 1 {
			return fmt.Errorf("one scrape saw %d snapshot generations: %v", len(seen), seen)
		}
		return nil
	}

	var scrapers sync.WaitGroup
	errs := make(chan error, 64)
	// Gatherers: the collector path itself, as many as we like.
	for range 16 {
		scrapers.Go(func() {
			for range 30 {
				mfs, err := reg.Gather()
				if err == nil {
					err = check(mfs)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// HTTP scrapers: below the in-flight limit, so none is turned away.
	for range maxScrapesInFlight / 2 {
		scrapers.Go(func() {
			for range 20 {
				resp, err := http.Get(srv.URL)
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("status %s", resp.Status)
				}
				if err == nil {
					p := expfmt.NewTextParser(model.LegacyValidation)
					var fams map[string]*dto.MetricFamily
					if fams, err = p.TextToMetricFamilies(bytes.NewReader(body)); err == nil {
						err = check([]*dto.MetricFamily{fams["layerprobe_iops"], fams["layerprobe_cycles_total"]})
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	scrapers.Wait()
	close(stop)
	swapper.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if swaps.Load() < 2 {
		t.Fatalf("only %d swaps happened during the scrapes; the test proved nothing", swaps.Load())
	}
	if l := logs.String(); l != "" {
		t.Fatalf("handler logged errors:\n%s", l)
	}
}

// blockingSource holds every Snapshot call until released, to keep
// scrapes in flight.
type blockingSource struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingSource) Snapshot() *Snapshot {
	select {
	case b.entered <- struct{}{}:
	default: // more calls than scrapes: the count check below fails instead of hanging
	}
	select {
	case <-b.release:
	case <-time.After(30 * time.Second):
	}
	return fullSnapshot()
}

func TestHandlerLimitsScrapesInFlight(t *testing.T) {
	src := &blockingSource{entered: make(chan struct{}, maxScrapesInFlight+1), release: make(chan struct{})}
	logger, _ := bufLogger()
	srv := httptest.NewServer(Handler(NewRegistry(src, true), logger))
	defer srv.Close()

	var wg sync.WaitGroup
	codes := make(chan int, maxScrapesInFlight)
	for range maxScrapesInFlight {
		wg.Go(func() {
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	for range maxScrapesInFlight {
		select {
		case <-src.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("scrapes did not reach the collector")
		}
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("scrape beyond the limit: %s, want 503", resp.Status)
	}
	close(src.release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("scrape within the limit: status %d", c)
		}
	}
}

// A bad label value costs its series and a log line, not the scrape.
func TestHandlerContinuesOnError(t *testing.T) {
	snap := fullSnapshot()
	snap.Engines[1].EngineVersion = "28.\xff"
	logger, logs := bufLogger()
	srv := httptest.NewServer(Handler(NewRegistry(staticSource{snap}, true), logger))
	defer srv.Close()
	mfs := parse(t, scrape(t, srv.URL))
	if mfs["layerprobe_overhead_ratio"] == nil || len(mfs["layerprobe_cycles_total"].GetMetric()) != 12 {
		t.Fatal("series of the good engine (or the bad engine's counters) are missing after one invalid label value")
	}
	l := logs.String()
	if !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "layerprobe_engine_info") || !strings.Contains(l, "component=metrics") {
		t.Fatalf("the gathering error was not logged through slog:\n%s", l)
	}
}

func TestBuildInfo(t *testing.T) {
	mfs, err := NewRegistry(staticSource{nil}, true).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "layerprobe_build_info" {
			continue
		}
		m := mf.GetMetric()
		if len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
			t.Fatalf("layerprobe_build_info: %v", m)
		}
		labels := map[string]string{}
		for _, lp := range m[0].GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		// The version collector's labels, with layerprobe's own version:
		// the metric and `layerprobe version` agree.
		v, rev, gov := version.Info()
		if rev == "" {
			rev = "unknown" // prometheus/common's word for a build without VCS information
		}
		if labels["version"] != v || labels["revision"] != rev || labels["goversion"] != gov ||
			labels["goos"] != runtime.GOOS || labels["goarch"] != runtime.GOARCH {
			t.Fatalf("layerprobe_build_info labels: %v; want version %q, revision %q, %s", labels, v, rev, gov)
		}
		return
	}
	t.Fatal("no layerprobe_build_info")
}
