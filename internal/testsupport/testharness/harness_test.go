package testharness

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const exposition = `# HELP layerprobe_overhead_ratio Overhead.
# TYPE layerprobe_overhead_ratio gauge
layerprobe_overhead_ratio{engine="default",metric="fsync_p99",target="container",workload="fsync"} 0.25
layerprobe_overhead_ratio{engine="default",metric="iops",target="bind",workload="fsync"} -0.01
# HELP layerprobe_engine_info Engine.
# TYPE layerprobe_engine_info gauge
layerprobe_engine_info{data_root="/var/lib/a \"b\", c",engine="default"} 1
# HELP layerprobe_cycles_total Cycles.
# TYPE layerprobe_cycles_total counter
layerprobe_cycles_total{engine="default",mode="steady",result="ok"} 3
layerprobe_cycles_total{engine="default",mode="cold",result="ok"} 1
# HELP http_seconds Latency.
# TYPE http_seconds histogram
http_seconds_bucket{le="0.1"} 2
http_seconds_bucket{le="+Inf"} 3
http_seconds_sum 0.5
http_seconds_count 3
`

func TestParseMetrics(t *testing.T) {
	ms, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := ms.Find("layerprobe_overhead_ratio", map[string]string{"target": "bind"}); !ok || v != -0.01 {
		t.Errorf("Find bind = %v, %v", v, ok)
	}
	if _, ok := ms.Find("layerprobe_overhead_ratio", map[string]string{"target": "volume"}); ok {
		t.Error("Find of an absent series: found")
	}
	if s := ms["layerprobe_engine_info"]; len(s) != 1 || s[0].Labels["data_root"] != `/var/lib/a "b", c` {
		t.Errorf("escaped label value: %+v", s)
	}
	if got := ms.Sum("layerprobe_cycles_total"); got != 4 {
		t.Errorf("Sum = %v, want 4", got)
	}
	if got := ms.ByLabel("layerprobe_cycles_total", "mode"); got["cold"] != 1 || got["steady"] != 3 {
		t.Errorf("ByLabel = %v", got)
	}
	if v, ok := ms.Find("http_seconds_bucket", map[string]string{"le": "+Inf"}); !ok || v != 3 {
		t.Errorf("histogram bucket = %v, %v", v, ok)
	}
	if v, ok := ms.Find("http_seconds_count", nil); !ok || v != 3 {
		t.Errorf("histogram count = %v, %v", v, ok)
	}
	if _, err := ParseMetrics(strings.NewReader("not { an exposition\n")); err == nil {
		t.Error("garbage parsed without error")
	}
}

func TestScrapeAndWaitHTTP(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := WaitHTTP(ctx, srv.URL, 300*time.Millisecond, nil); err == nil {
		t.Error("WaitHTTP on a 503: no error")
	}
	exited := make(chan struct{})
	close(exited)
	if err := WaitHTTP(ctx, srv.URL, time.Minute, exited); !errors.Is(err, ErrExited) {
		t.Errorf("WaitHTTP with an exited process = %v, want ErrExited", err)
	}
	ready.Store(true)
	if err := WaitHTTP(ctx, srv.URL, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	raw, ms, err := Scrape(ctx, srv.Client(), srv.URL)
	if err != nil || raw != exposition || len(ms["layerprobe_overhead_ratio"]) != 2 {
		t.Errorf("Scrape = %d bytes, %d families, %v", len(raw), len(ms), err)
	}
}

func TestProcStop(t *testing.T) {
	// The trap before the echo: a SIGTERM sent as soon as "started"
	// appears must find it installed.
	p, err := Start(exec.Command("sh", "-c", "trap 'echo bye; exit 3' TERM; echo started; while :; do sleep 0.05; done"))
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 10*time.Second, "the child prints", func() bool { return strings.Contains(p.Log.String(), "started") })
	if code, inTime := p.Stop(10 * time.Second); code != 3 || !inTime {
		t.Errorf("Stop = %d, %v; want exit 3 in time", code, inTime)
	}
	if p.Running() || !strings.Contains(p.Log.String(), "bye") {
		t.Errorf("after Stop: running %v, log %q", p.Running(), p.Log.String())
	}

	p, err = Start(exec.Command("sh", "-c", "trap '' TERM; echo started; while :; do sleep 0.05; done"))
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 10*time.Second, "the child prints", func() bool { return strings.Contains(p.Log.String(), "started") })
	if _, inTime := p.Stop(200 * time.Millisecond); inTime {
		t.Error("a child ignoring SIGTERM stopped in time")
	}
}

func TestTail(t *testing.T) {
	if got := Tail("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("Tail = %q", got)
	}
}

// Build finds the product's module from a module nested in it (bench/).
func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module github.com/layerprobe/layerprobe\n\ngo 1.26\n":                  productModule,
		"// the benchmark\nmodule \"github.com/layerprobe/layerprobe/bench\"\n": productModule + "/bench",
		"go 1.26\n": "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// CopyTree keeps modes and symbolic links and leaves out what it is told
// to, at any depth, and only that.
func TestCopyTreeExcludes(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	for p, mode := range map[string]os.FileMode{
		"boot/vmlinuz": 0o600, "usr/lib/modules/6.1/x.ko": 0o644, "usr/lib/os-release": 0o644, "usr/bin/tool": 0o755,
	} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), []byte(p), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("usr/bin", filepath.Join(src, "bin")); err != nil {
		t.Fatal(err)
	}
	CopyTree(t, src, dst, "boot", "usr/lib/modules")
	for _, p := range []string{"boot", "usr/lib/modules"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); !os.IsNotExist(err) {
			t.Errorf("%s copied although excluded (err %v)", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dst, "usr/lib/os-release")); err != nil || string(b) != "usr/lib/os-release" {
		t.Errorf("usr/lib/os-release: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "usr/bin/tool")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("usr/bin/tool: %v, %v; want mode 0755", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "bin")); err != nil || l != "usr/bin" {
		t.Errorf("bin -> %q, %v; want usr/bin", l, err)
	}
}
