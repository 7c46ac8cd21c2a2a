// Package vm runs layerprobe against a container engine in a real virtual
// machine, as developer workstations run theirs (Docker Desktop, Lima,
// Colima, OrbStack, Podman machine): a Debian 12 guest under QEMU with
// Debian's dockerd, a host directory shared into it with virtio-9p at the
// same path (Lima's 9p mounts), and the engine's socket forwarded to this
// host over ssh (Lima's and Colima's way). layerprobe runs on the host and
// must see topology vm: host native, bind through the 9p share, volume and
// container on the VM's disk.
package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/layerprobe/layerprobe/internal/testsupport/testvm"
)

// binary is the layerprobe binary the test runs, built once.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	var err error
	if binary, err = testharness.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testharness.RemoveBinary()
	os.Exit(code)
}

// vmEngine is the running guest and its forwarded engine socket.
type vmEngine struct {
	share  string // the host directory shared into the guest at the same path
	socket string // the guest's docker.sock, forwarded to this host
	dir    string
}

// forwardEngine forwards the guest's engine socket to this host.
func forwardEngine(t *testing.T, g *testvm.Guest) *vmEngine {
	t.Helper()
	v := &vmEngine{share: g.Share, socket: filepath.Join(g.Dir, "docker.sock"), dir: g.Dir}
	// The socket's forwarding, as Lima and Colima forward theirs.
	g.Forward(t, v.socket, "/run/docker.sock")
	docker := testvm.Tool(t, "docker")
	testharness.Eventually(t, time.Minute, time.Second, "the forwarded engine socket", func() (bool, string) {
		out, err := run(t, 30*time.Second, []string{"DOCKER_HOST=unix://" + v.socket}, docker, "info", "--format", "{{.Name}}")
		return err == nil && strings.TrimSpace(out) == "lpvm", out
	})
	return v
}

// TestGuest boots one Debian 12 guest (testvm) on the unified cgroup
// hierarchy and runs the tests that need it one after the other: a boot
// under TCG is minutes of this machine's CPU, which the rest of the suite
// shares.
func TestGuest(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testharness.SkipOrFail(t, "needs root (debootstrap, QEMU's 9p share as root)")
	}
	start := time.Now()
	g := testvm.Boot(t, testvm.BuildImage(t), testvm.Options{Cmdline: testvm.V2Cmdline})
	t.Run("EngineInVM", func(t *testing.T) {
		start := time.Now()
		testEngineInVM(t, forwardEngine(t, g))
		t.Logf("EngineInVM: %s", time.Since(start).Round(time.Second))
	})
	t.Run("JoinOnCgroupV2", func(t *testing.T) {
		start := time.Now()
		testJoinOnCgroupV2(t, g)
		t.Logf("JoinOnCgroupV2: %s", time.Since(start).Round(time.Second))
	})
	t.Logf("the guest booted in %s; its tests took %s in all", g.Booted.Round(time.Second), time.Since(start).Round(time.Second))
}

// run runs a command with a timeout and returns its combined output.
func run(t *testing.T, timeout time.Duration, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// testEngineInVM runs `layerprobe run` and an agent cycle against the
// guest's engine from this host, and checks the topology: every
// target measured, host on this host's disk (native), bind through the
// 9p share, the host arm's cgroup not applicable, and every ratio labelled
// as against the native host disk.
func testEngineInVM(t *testing.T, v *vmEngine) {
	scratch := filepath.Join(v.share, "layerprobe")
	cfg := filepath.Join(v.dir, "config.yaml")
	// No topology key: layerprobe must find the VM itself (the data root
	// is not on this host and the engine answers from another kernel or
	// host name). Two workloads, the data path and the metadata path:
	// every execution in the emulated guest costs this machine's CPU, which
	// the rest of the test suite shares, and the topology is the same for
	// all four.
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("workloads: [seqwrite, smallfiles]\nengines:\n  - name: vm\n    host: unix://%s\n    scratch_dir: %s\n", v.socket, scratch)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"LAYERPROBE_LOCK_FILE=" + filepath.Join(v.dir, "lock")}

	// The agent first: its first cycle imports the probe image and keeps
	// it, and the run below, while the agent still runs, finds it in the
	// engine instead of importing it again (a minute through the
	// forwarded socket into an emulated guest).
	// The agent holds its measurement lock as long as it runs: a lock of
	// its own, so that the run can measure while the agent waits out its
	// interval (an hour) after the first cycle.
	stopAgent := agentCycle(t, cfg, []string{"LAYERPROBE_LOCK_FILE=" + filepath.Join(v.dir, "agent.lock")}, v)
	defer stopAgent()

	start := time.Now()
	// The run measures the data path alone: the agent's cycle above
	// measured small files through the share already, and each of their
	// executions through 9p in the emulated guest costs this machine
	// about a minute and a half of CPU.
	out, err := runOut(t, 8*time.Minute, env, binary, "run", "--config", cfg, "--profile", "smoke", "--rounds", "2", "--workloads", "seqwrite", "--output", "json", "--quiet")
	if err != nil {
		t.Fatalf("layerprobe run: %v\n%s", err, testharness.Tail(out.stderr, 30))
	}
	t.Logf("layerprobe run against the VM's engine: %s", time.Since(start).Round(time.Second))
	var r report.Run
	if err := json.Unmarshal([]byte(out.stdout), &r); err != nil {
		t.Fatalf("run JSON: %v\n%s", err, out.stdout)
	}
	if len(r.Engines) != 1 {
		t.Fatalf("engines: %d", len(r.Engines))
	}
	e := r.Engines[0]
	if e.Error != nil {
		t.Fatalf("engine error: %+v", e.Error)
	}
	if e.Topology != "vm" || e.Baseline != "native host disk" || e.Share != "9p" {
		t.Errorf("topology %q, baseline %q, share %q; want vm, native host disk, 9p (from the probe container's mountinfo)", e.Topology, e.Baseline, e.Share)
	}
	if e.HostArmCgroup != "not_applicable" {
		t.Errorf("host_arm_cgroup %q, want not_applicable", e.HostArmCgroup)
	}
	if e.DataRoot != "/var/lib/docker" {
		t.Errorf("data root %q, want the guest's /var/lib/docker", e.DataRoot)
	}
	ok := map[measure.Target]int{}
	for _, s := range e.Samples {
		if s.OK() {
			ok[s.Target]++
		}
	}
	for _, tg := range measure.Targets {
		if ok[tg] == 0 {
			t.Errorf("target %s: no successful sample (%v)", tg, ok)
		}
	}
	for _, res := range e.Results {
		if res.Target == measure.TargetBind {
			t.Logf("bind/%s vs native host: %+v", res.Workload, res)
		}
	}
}

type outputs struct{ stdout, stderr string }

func runOut(t *testing.T, timeout time.Duration, env []string, name string, args ...string) (outputs, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return outputs{o.String(), e.String()}, err
}

// agentCycle runs the agent against the VM's engine until its first steady
// cycle, then checks /api/v1/engines and /metrics: topology vm, share 9p,
// and no layerprobe_host_arm_cgroup_joined series (its alert cannot fire
// for an arm that cannot join by design).
func agentCycle(t *testing.T, cfg string, env []string, v *vmEngine) (stop func()) {
	t.Helper()
	port := testharness.MustFreePort(t)
	state := filepath.Join(v.dir, "state")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	agentCfg := filepath.Join(v.dir, "agent.yaml")
	// The busy-host guards off, as in every agent test: the rest of the
	// suite loads this machine's disk and CPUs meanwhile, and a skipped
	// cycle would measure nothing. The bind mount alone beside the host:
	// the share is what sets an engine in a VM apart (the run below
	// measures the container and the volume), and every execution in the
	// emulated guest costs this machine's CPU.
	agentYAML := string(b) + fmt.Sprintf("targets: [bind]\nprofile: smoke\nagent:\n  listen_address: 127.0.0.1:%d\n  state_dir: %s\n  interval: 1h\n  jitter: 0\n"+
		"  cold_interval: 0s\n  max_io_pressure: 100\n  max_disk_util: 1\n  churn_quiet_period: 0s\n  budget:\n    rounds: 1\n", port, state)
	if err := os.WriteFile(agentCfg, []byte(agentYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "agent", "--config", agentCfg)
	cmd.Env = append(os.Environ(), env...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	p, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	stop = func() { p.Stop(30 * time.Second) }
	defer func() {
		if t.Failed() {
			stop()
		}
	}()
	start := time.Now()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 10 * time.Second}
	var engines struct {
		Engines []struct {
			Name          string `json:"name"`
			Topology      string `json:"topology"`
			Share         string `json:"share"`
			Baseline      string `json:"baseline"`
			HostArmCgroup string `json:"host_arm_cgroup"`
			LastCycle     *struct {
				Result string `json:"result"`
			} `json:"last_cycle"`
		} `json:"engines"`
	}
	testharness.Eventually(t, 8*time.Minute, 5*time.Second, "the agent's first cycle on the VM's engine", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("agent exited:\n%s", testharness.Tail(log.String(), 30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := testharness.GetJSON(ctx, client, base+"/api/v1/engines", &engines); err != nil {
			return false, err.Error()
		}
		if len(engines.Engines) == 1 && engines.Engines[0].LastCycle != nil {
			return true, ""
		}
		return false, "no cycle yet"
	})
	t.Logf("the agent's first cycle on the VM's engine: %s", time.Since(start).Round(time.Second))
	e := engines.Engines[0]
	if e.LastCycle.Result != "ok" || e.Topology != "vm" || e.Share != "9p" || e.Baseline != "native host disk" || e.HostArmCgroup != "not_applicable" {
		t.Errorf("agent's engine: %+v (cycle %+v); want an ok cycle, topology vm, share 9p, baseline native host disk, host arm not_applicable\n%s",
			e, *e.LastCycle, testharness.Tail(log.String(), 20))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, m, err := testharness.Scrape(ctx, client, base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if _, found := m["layerprobe_host_arm_cgroup_joined"]; found {
		t.Errorf("/metrics has layerprobe_host_arm_cgroup_joined for an engine in a VM; its alert would fire")
	}
	if _, found := m["layerprobe_overhead_ratio"]; !found {
		t.Errorf("/metrics has no layerprobe_overhead_ratio after the cycle")
	}
	return stop
}
