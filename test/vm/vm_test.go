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

// testEngineInVM runs an agent against the guest's engine from this host
// until its first cycle, and checks the topology it reports: every target
// measured, host on this host's disk (native), bind through the 9p share,
// the host arm's cgroup not applicable, the data root the guest's, and no
// layerprobe_host_arm_cgroup_joined series (its alert cannot fire for an
// arm that cannot join by design). One agent cycle, not a cycle and a
// `layerprobe run`: both take their topology from the same engine
// inspection, and every execution in the emulated guest costs this
// machine's CPU, which the rest of the test suite shares (a run took
// 3 min 22 s of the guest package's 23 min under the suite's load).
func testEngineInVM(t *testing.T, v *vmEngine) {
	scratch := filepath.Join(v.share, "layerprobe")
	port := testharness.MustFreePort(t)
	cfg := filepath.Join(v.dir, "agent.yaml")
	// No topology key: layerprobe must find the VM itself (the data root
	// is not on this host and the engine answers from another kernel or
	// host name). Every target, one round of two workloads, the data path
	// and the metadata path: small files through the 9p share are the
	// slowest job there is (over a minute under the suite's load, which
	// the VM's longer job timeout must allow). The busy-host guards off,
	// as in every agent test: the rest of the suite loads this machine's
	// disk and CPUs meanwhile, and a skipped cycle would measure nothing.
	yaml := fmt.Sprintf("workloads: [seqwrite, smallfiles]\nprofile: smoke\nengines:\n  - name: vm\n    host: unix://%s\n    scratch_dir: %s\n"+
		"agent:\n  listen_address: 127.0.0.1:%d\n  state_dir: %s\n  interval: 1h\n  jitter: 0\n"+
		"  cold_interval: 0s\n  max_io_pressure: 100\n  max_disk_util: 1\n  churn_quiet_period: 0s\n  budget:\n    rounds: 1\n",
		v.socket, scratch, port, filepath.Join(v.dir, "state"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "agent", "--config", cfg)
	cmd.Env = append(os.Environ(), "LAYERPROBE_LOCK_FILE="+filepath.Join(v.dir, "agent.lock"))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	p, err := testharness.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(30 * time.Second)
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
			DataRoot      string `json:"data_root"`
			LastCycle     *struct {
				Result string `json:"result"`
			} `json:"last_cycle"`
		} `json:"engines"`
	}
	// The first cycle imports the probe image into the guest's engine
	// (a minute through the forwarded socket) and keeps it there, where
	// testJoinOnCgroupV2 finds it.
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
		t.Errorf("agent's engine: %+v (cycle %+v); want an ok cycle, topology vm, share 9p (from the probe container's mountinfo), baseline native host disk, host arm not_applicable\n%s",
			e, *e.LastCycle, testharness.Tail(log.String(), 20))
	}
	if e.DataRoot != "/var/lib/docker" {
		t.Errorf("data root %q, want the guest's /var/lib/docker", e.DataRoot)
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
	// Every target against the host arm: a ratio each, so every arm ran.
	ratios := m.ByLabel("layerprobe_overhead_ratio", "target")
	for _, tg := range measure.Targets {
		if tg == measure.TargetHost {
			continue
		}
		if _, ok := ratios[string(tg)]; !ok {
			t.Errorf("/metrics has no layerprobe_overhead_ratio for target %s after the cycle (targets with a ratio: %v)", tg, ratios)
		}
	}
	for _, s := range m["layerprobe_overhead_ratio"] {
		if s.Labels["target"] == string(measure.TargetBind) {
			t.Logf("bind vs native host: %v = %.3f", s.Labels, s.Value)
		}
	}
}
