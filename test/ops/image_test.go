package ops

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// imageAgentConfig replaces the compose stack's config.yaml in the image
// test: the smoke profile and the guards off, so that one cycle takes
// seconds whatever the CI machine does. Eight rounds: the interval series
// need 6 round pairs, and on a busy CI machine one 100 ms smoke execution
// may fail (its cycle in a fresh-clone run lost one fsync round, which
// withheld fsync's intervals). No byte cap: the smoke executions are
// timed, so eight rounds on a fast disk may write more than the default
// 512 MiB, and a cycle stopped on bytes would withhold intervals too.
const imageAgentConfig = `profile: smoke
agent:
  interval: 1h
  jitter: 0
  rounds_per_cycle: 8
  cycle_max_bytes: 0
  daily_byte_budget: 4GiB
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
`

// TestAgentImage builds the agent image with scripts/release-image.sh (what
// `make release` runs: deploy/docker/Dockerfile COPYing the built binary) on
// a private dockerd, from a Debian base made with deploy/docker/debootstrap-base.sh
// (debootstrap from Debian's mirror, `docker import`: no image registry),
// and runs it with the compose file's settings (no capability, read-only,
// no-new-privileges, host pid namespace) and the daemon's socket and data
// root mounted. Its /metrics must serve the contract series after a cycle,
// with the image's own fio in both arms, and SIGTERM (docker stop) must
// leave no probe container behind.
func TestAgentImage(t *testing.T) {
	needsSystem(t)
	queue.Parallel(t)
	tool(t, "debootstrap")
	docker := tool(t, "docker")
	bin := agentBinary(t)
	compose := composeConfig(t)
	svc := compose.Services["layerprobe"]
	checkAgentHardening(t, svc)

	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	env := []string{"DOCKER_HOST=" + d.Host, "DOCKER_BUILDKIT=0"}
	dockerCmd := func(timeout time.Duration, args ...string) cmdResult {
		t.Helper()
		return run(t, timeout, "", env, docker, args...)
	}

	// The base, from Debian's packages only.
	start := time.Now()
	tmp := t.TempDir()
	r := run(t, 8*time.Minute, "", append(env, "TMPDIR="+tmp), repoPath("deploy/docker/debootstrap-base.sh"), "layerprobe-base:test")
	if r.err != nil {
		t.Fatalf("debootstrap-base.sh:\n%s", r)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "layerprobe-base.*")); len(left) > 0 {
		t.Errorf("debootstrap-base.sh left %v behind", left)
	}
	t.Logf("debootstrap base: %s", time.Since(start).Round(time.Second))

	// The image, as `make release` builds it: scripts/release-image.sh
	// COPYs the built binary into deploy/docker/Dockerfile's image (a
	// context holding nothing else) and saves it for `docker load`.
	start = time.Now()
	tarball := filepath.Join(tmp, "layerprobe.image.tar")
	r = run(t, 8*time.Minute, "", append(env, "TMPDIR="+tmp, "BASE_IMAGE=layerprobe-base:test"),
		repoPath("scripts/release-image.sh"), bin, "layerprobe:test", tarball)
	if r.err != nil {
		t.Fatalf("release-image.sh:\n%s", testharness.Tail(r.stdout+r.stderr, 40))
	}
	if fi, err := os.Stat(tarball); err != nil || fi.Size() < 1<<20 {
		t.Errorf("release-image.sh saved no image: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "layerprobe-image.*")); len(left) > 0 {
		t.Errorf("release-image.sh left %v behind", left)
	}
	if v := strings.TrimSpace(dockerCmd(time.Minute, "image", "inspect", "-f", `{{index .Config.Labels "org.opencontainers.image.version"}}`, "layerprobe:test").stdout); v != versionFile(t) {
		t.Errorf("image version label %q, want the VERSION file's %q", v, versionFile(t))
	}
	t.Logf("docker build: %s", time.Since(start).Round(time.Second))
	fioVersion := strings.TrimSpace(dockerCmd(time.Minute, "run", "--rm", "--network", "none", "--entrypoint", "fio", "layerprobe:test", "--version").stdout)
	if !strings.HasPrefix(fioVersion, "fio-") {
		t.Fatalf("fio --version in the image: %q", fioVersion)
	}

	// Run it as the compose file does, with the private daemon's paths.
	port := testharness.MustFreePort(t)
	args := []string{"run", "-d", "--name", "lpops-agent", "--network", "host"}
	args = append(args, composeRunFlags(t, svc, d, tmp)...)
	args = append(args, "layerprobe:test", "agent", "--web.listen-address", fmt.Sprintf("127.0.0.1:%d", port))
	if r := dockerCmd(time.Minute, args...); r.err != nil {
		t.Fatalf("docker run:\n%s", r)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent container log:\n%s", testharness.Tail(dockerCmd(time.Minute, "logs", "lpops-agent").stderr, 40))
		}
		dockerCmd(time.Minute, "rm", "-f", "lpops-agent")
	})
	var series testharness.Metrics
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	// The first cycle (8 smoke rounds of four workloads on four targets)
	// took more than 4 minutes in a fresh-clone run while the rest of the
	// suite loaded both cores; the wait bounds only a failure.
	cycleStart := time.Now()
	testharness.Eventually(t, 10*time.Minute, time.Second, "a successful cycle in the container's /metrics", func() (bool, string) {
		if st := dockerCmd(time.Minute, "inspect", "-f", "{{.State.Status}}", "lpops-agent").stdout; strings.TrimSpace(st) != "running" {
			t.Fatalf("agent container is %s:\n%s", st, testharness.Tail(dockerCmd(time.Minute, "logs", "lpops-agent").stderr, 40))
		}
		_, ms, err := testharness.Scrape(context.Background(), http.DefaultClient, metricsURL)
		if err != nil {
			return false, err.Error()
		}
		series = ms
		_, ok := series.Find("layerprobe_last_success_timestamp_seconds", nil)
		return ok, "no successful cycle yet"
	})
	t.Logf("first cycle in the container: %s", time.Since(cycleStart).Round(time.Second))
	checkImageSeries(t, series, fioVersion)

	// SIGTERM: the agent removes its probe container and exits 0.
	if r := dockerCmd(time.Minute, "stop", "-t", "30", "lpops-agent"); r.err != nil {
		t.Fatalf("docker stop:\n%s", r)
	}
	if code := strings.TrimSpace(dockerCmd(time.Minute, "inspect", "-f", "{{.State.ExitCode}}", "lpops-agent").stdout); code != "0" {
		t.Errorf("agent container exited with %s after SIGTERM, want 0", code)
	}
	if left := strings.TrimSpace(dockerCmd(time.Minute, "ps", "-aq", "--filter", "label=io.layerprobe.managed").stdout); left != "" {
		t.Errorf("probe containers left after the agent stopped: %s", left)
	}
}

// composeRunFlags translates the compose file's layerprobe service into
// `docker run` flags for the private daemon: the same user, capabilities,
// security options, read-only root, tmpfs and pid namespace, and the same
// mounts with the private daemon's socket and data root in place of the
// host's. A mount the test does not know fails the test, so that a change
// of the compose file is reflected here.
func composeRunFlags(t *testing.T, s composeService, d *testdaemon.Daemon, tmp string) []string {
	t.Helper()
	flags := []string{"--user", s.User, "--pid", s.Pid}
	if s.Cgroup != "" {
		flags = append(flags, "--cgroupns", s.Cgroup)
	}
	for _, c := range s.CapDrop {
		flags = append(flags, "--cap-drop", c)
	}
	for _, o := range s.SecurityOpt {
		flags = append(flags, "--security-opt", o)
	}
	if s.ReadOnly {
		flags = append(flags, "--read-only")
	}
	for _, p := range s.Tmpfs {
		flags = append(flags, "--tmpfs", p)
	}
	cfg := filepath.Join(tmp, "config.yaml")
	if err := os.WriteFile(cfg, []byte(imageAgentConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"state", "lock"} {
		if err := os.MkdirAll(filepath.Join(tmp, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sources := map[string]string{
		"/var/run/docker.sock":               strings.TrimPrefix(d.Host, "unix://"),
		"/var/lib/docker":                    d.DataRoot,
		"/var/lib/docker/layerprobe-scratch": filepath.Join(d.DataRoot, "layerprobe-scratch"),
		"/run/lock":                          filepath.Join(tmp, "lock"),
		"/sys/fs/cgroup":                     "/sys/fs/cgroup",
		"layerprobe-state":                   filepath.Join(tmp, "state"),
		repoPath("deploy/compose/layerprobe/config.yaml"): cfg,
	}
	// The data root and the scratch directory keep the node's paths inside
	// the container: here, the private daemon's.
	targets := map[string]string{
		"/var/lib/docker":                    d.DataRoot,
		"/var/lib/docker/layerprobe-scratch": filepath.Join(d.DataRoot, "layerprobe-scratch"),
	}
	if err := os.MkdirAll(filepath.Join(d.DataRoot, "layerprobe-scratch"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, v := range s.Volumes {
		src, ok := sources[v.Source]
		if !ok {
			t.Fatalf("compose volume %s: this test does not know how to provide %s", v, v.Source)
		}
		dst := v.Target
		if tg, ok := targets[dst]; ok {
			dst = tg
		}
		mode := "rw"
		if v.ReadOnly {
			mode = "ro"
		}
		flags = append(flags, "-v", src+":"+dst+":"+mode)
	}
	return flags
}

// checkImageSeries: the contract series of docs/metrics.md for a
// successful cycle, from the agent in the image.
func checkImageSeries(t *testing.T, series testharness.Metrics, fioVersion string) {
	t.Helper()
	for _, tg := range []string{"container", "bind", "volume"} {
		for _, name := range []string{"layerprobe_overhead_ratio", "layerprobe_overhead_ci_low_ratio", "layerprobe_overhead_ci_high_ratio"} {
			l := map[string]string{"engine": "default", "driver": "overlay2", "target": tg, "workload": "fsync", "metric": "fsync_p99"}
			if _, ok := series.Find(name, l); !ok {
				t.Errorf("%s%v missing", name, l)
			}
		}
		if v, ok := series.Find("layerprobe_fsync_regression", map[string]string{"target": tg}); !ok || v != 0 {
			t.Errorf("layerprobe_fsync_regression{target=%q} = %v (present %v)", tg, v, ok)
		}
	}
	// The lean default, as the image runs: each workload's headline raw
	// figure (sequential write bandwidth, random write IOPS, fsync p99),
	// and no other.
	if v, ok := series.Find("layerprobe_metrics_detail", nil); !ok || v != 0 {
		t.Errorf("layerprobe_metrics_detail = %v (present %v), want 0: the default is lean", v, ok)
	}
	for _, l := range []map[string]string{{"workload": "randwrite", "op": "write", "percentile": "50"}, {"workload": "fsync", "op": "read"}} {
		if v, ok := series.Find("layerprobe_latency_seconds", l); ok {
			t.Errorf("layerprobe_latency_seconds%v = %v in the lean default, want only the fsync p99", l, v)
		}
	}
	for _, tg := range []string{"host", "container", "bind", "volume"} {
		for _, q := range []struct{ name, workload string }{
			{"layerprobe_bandwidth_bytes_per_second", "seqwrite"},
			{"layerprobe_iops", "randwrite"},
		} {
			l := map[string]string{"target": tg, "workload": q.workload, "op": "write"}
			if v, ok := series.Find(q.name, l); !ok || !(v > 0) {
				t.Errorf("%s%v = %v (present %v)", q.name, l, v, ok)
			}
		}
		l := map[string]string{"target": tg, "workload": "fsync", "op": "sync", "percentile": "99"}
		if v, ok := series.Find("layerprobe_latency_seconds", l); !ok || !(v > 0) {
			t.Errorf("layerprobe_latency_seconds%v = %v (present %v)", l, v, ok)
		}
		if v, ok := series.Find("layerprobe_written_bytes_total", map[string]string{"target": tg}); !ok || !(v > 0) {
			t.Errorf("layerprobe_written_bytes_total{target=%q} = %v (present %v)", tg, v, ok)
		}
	}
	if v, ok := series.Find("layerprobe_cycles_total", map[string]string{"result": "ok", "mode": "steady"}); !ok || v < 1 {
		t.Errorf("layerprobe_cycles_total{result=ok,mode=steady} = %v (present %v)", v, ok)
	}
	for _, name := range []string{"layerprobe_cycle_duration_seconds", "layerprobe_last_success_timestamp_seconds",
		"layerprobe_daily_budget_bytes", "layerprobe_budget_used_bytes", "layerprobe_build_info"} {
		if v, ok := series.Find(name, nil); !ok || !(v > 0) {
			t.Errorf("%s = %v (present %v)", name, v, ok)
		}
	}
	if _, ok := series.Find("layerprobe_cycle_skips_total", map[string]string{"reason": "budget_exhausted"}); !ok {
		t.Error("layerprobe_cycle_skips_total{reason=budget_exhausted} missing")
	}
	info := map[string]string{"engine": "default", "driver": "overlay2", "backing_fs": "extfs", "fio_version": fioVersion}
	if v, ok := series.Find("layerprobe_engine_info", info); !ok || v != 1 {
		t.Errorf("layerprobe_engine_info%v = %v (present %v); series: %v", info, v, ok, series["layerprobe_engine_info"])
	}
	// Every metric family of the exposition is a documented one.
	docs := documentedMetrics(t)
	for name := range series {
		if strings.HasPrefix(name, "layerprobe_") && !docs[name] {
			t.Errorf("the agent exposes %s, which docs/metrics.md does not list", name)
		}
	}
}
