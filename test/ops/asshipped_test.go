package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// The tests in this file run each shipped deployment as it is shipped (the
// systemd unit under a real systemd, the compose file with docker-compose,
// the DaemonSet's pod spec with `docker run`) on a private engine whose
// CPUs are kept busy by other containers, and check what a user of that
// deployment gets: the agent says its host arm joined the probe
// container's CPU cgroups, no warning says otherwise, and the host arm's
// processes, watched in /proc while the cycle runs, really are in those
// cgroups (checkArmCgroups).

// loadedAgentConfig is the agent configuration of the loaded runs: the
// host arm and one target in the probe container, bind (whose A/A figure
// checkLoadedAA logs; the container and volume arms run in the same
// container and add nothing to the join); the smoke profile with 6 rounds
// of each workload in the first cycle (the fewest with a 95% exact
// interval: four deployments' cycles one after the other on the box's one
// busy CPU are the longest path of the suite); a cycle at start and no
// guardrail that would skip it on a busy host (the load is the point).
// The listen address is filled in.
const loadedAgentConfig = `profile: smoke
targets: [bind]
workloads: [randwrite, smallfiles]
agent:
  listen_address: %s
  interval: 1h
  jitter: 0
  budget:
    rounds: 6
  daily_byte_budget: 8GiB
  max_io_pressure: 100
  max_disk_util: 1
  churn_quiet_period: 0s
`

// loadedWorkloads are the workloads of loadedAgentConfig: one run by fio
// (4 KiB random writes from four threads) and one by layerprobe's own
// small-file helper, the two kinds of host arm the join must hold for.
var loadedWorkloads = []measure.Workload{measure.RandWrite, measure.SmallFiles}

// checkLoadedAA checks what a loaded deployment's agent published: the
// host arm joined (engines), the first steady cycle gave every workload a
// 95% interval for the bind target, and it logs bind's A/A figures. They
// are not checked: under the whole suite's load the smoke profile's short
// rounds on the box's one busy CPU gave bind from 3% to 15412% of the host
// with the join in place (checkArmCgroups is the check); a lost join read
// 289–1418%, and `make bench` measures bind against the host on a quiet
// machine.
func checkLoadedAA(t *testing.T, engines api.EnginesResponse, overhead api.OverheadResponse) {
	t.Helper()
	if len(engines.Engines) != 1 {
		t.Fatalf("want one engine, have %+v", engines.Engines)
	}
	e := engines.Engines[0]
	if e.HostArmCgroup != "joined" {
		t.Errorf("host arm: %q (%s), want joined; warnings %q", e.HostArmCgroup, e.HostArmCgroupError, e.Warnings)
	}
	for _, w := range e.Warnings {
		if strings.Contains(w, "CPU cgroup") {
			t.Errorf("engine warning: %s", w)
		}
	}
	var steady *api.EngineOverhead
	for i := range overhead.Engines {
		if overhead.Engines[i].Mode == measure.ModeSteady {
			steady = &overhead.Engines[i]
		}
	}
	if steady == nil {
		t.Fatalf("no steady overheads: %+v", overhead)
	}
	seen := map[measure.Workload]bool{}
	for _, r := range steady.Results {
		if r.Target != measure.TargetBind {
			continue
		}
		seen[r.Workload] = true
		m := measure.HeadlineMetric(r.Workload)
		o, ok := r.Overhead[m]
		if !ok {
			t.Errorf("bind %s: no %s overhead", r.Workload, m)
			continue
		}
		t.Logf("bind %-9s %-9s %5.0f%% of host [%4.0f–%4.0f], %d rounds, coverage %.2f (A/A under load, not checked)",
			r.Workload, m, o.PercentOfHost, o.PercentLow, o.PercentHigh, o.N, o.Coverage)
		if o.N < 6 || o.Coverage < 0.95 {
			t.Errorf("bind %s: %d rounds, coverage %.2f: not a 95%% interval", r.Workload, o.N, o.Coverage)
		}
	}
	for _, w := range loadedWorkloads {
		if !seen[w] {
			t.Errorf("no bind result for %s", w)
		}
	}
}

// checkArmCgroups checks, from what `lpworkload armcg` saw while the cycle
// ran, that every host-arm process (fio and its workers, the small-file
// helper) ran in the CPU cgroups of a probe container's processes and not
// in the agent's (asshipped.ArmCgroupProblems).
func checkArmCgroups(t *testing.T, procs []asshipped.ArmProcess) {
	t.Helper()
	seen, problems := asshipped.ArmCgroupProblems(procs, "fio", "smallfiles")
	t.Logf("host-arm processes checked: %d of fio, %d of the small-file helper (of %d processes seen)", seen["fio"], seen["smallfiles"], len(procs))
	for i, p := range problems {
		if i == 5 {
			t.Errorf("... and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
}

// watchArms starts `lpworkload armcg` in the box for the agent whose PID
// pid returns, and returns a function that stops it and returns what it saw.
func watchArms(t *testing.T, b *testBox, name string, pid func() int) func() []asshipped.ArmProcess {
	t.Helper()
	var p int
	testharness.Eventually(t, 2*time.Minute, time.Second, "the agent's PID", func() (bool, string) {
		p = pid()
		return p > 0, "no PID yet"
	})
	t.Logf("watching the arms of the agent, PID %d in the box", p)
	out, stop := "armcg-"+name+".jsonl", "armcg-"+name+".stop"
	done := make(chan cmdResult, 1)
	go func() {
		done <- b.exec(t, 30*time.Minute, b.workload, "armcg", strconv.Itoa(p), boxShare+"/"+out, boxShare+"/"+stop)
	}()
	return func() []asshipped.ArmProcess {
		if err := os.WriteFile(filepath.Join(b.share, stop), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r.err != nil {
			t.Fatalf("lpworkload armcg:\n%s", r)
		}
		if now := pid(); now != p {
			t.Errorf("the agent's PID changed while its arms were watched: %d, then %d (a restart)", p, now)
		}
		var procs []asshipped.ArmProcess
		dec := json.NewDecoder(strings.NewReader(readFile(t, filepath.Join(b.share, out))))
		for dec.More() {
			var a asshipped.ArmProcess
			if err := dec.Decode(&a); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			procs = append(procs, a)
		}
		return procs
	}
}

// agentConfigFile writes loadedAgentConfig for listen address addr into
// dir/config.yaml and returns its path.
func agentConfigFile(t *testing.T, dir, addr string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, fmt.Appendf(nil, loadedAgentConfig, addr), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// decodeJSON decodes b into v or fails with what b was.
func decodeJSON(t *testing.T, what string, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, testharness.Tail(string(b), 20))
	}
}

// waitFirstSteadyCycle polls the agent's cycles through get until the
// first steady cycle has ended, and fails unless it succeeded.
func waitFirstSteadyCycle(t *testing.T, timeout time.Duration, get func(path string) ([]byte, error), alive func() string) {
	t.Helper()
	var last api.CyclesResponse
	testharness.Eventually(t, timeout, 3*time.Second, "the first steady cycle to end", func() (bool, string) {
		if why := alive(); why != "" {
			t.Fatalf("the agent is not running: %s", why)
		}
		b, err := get("/api/v1/cycles")
		if err != nil {
			return false, err.Error()
		}
		last = api.CyclesResponse{}
		if err := json.Unmarshal(b, &last); err != nil {
			return false, err.Error()
		}
		for _, c := range last.Cycles {
			if c.Mode == measure.ModeSteady && c.Result != "running" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("cycles: %+v", last.Cycles)
	})
	for _, c := range last.Cycles {
		if c.Mode == measure.ModeSteady && c.Result != "running" && c.Result != "ok" {
			t.Fatalf("the first steady cycle ended %s (%s: %s)", c.Result, c.Reason, c.Message)
		}
	}
}

// noJoinWarning fails t when the agent's log says the host arm stayed
// outside the probe container's CPU cgroups.
func noJoinWarning(t *testing.T, log string) {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "outside the probe container's CPU cgroup") {
			t.Errorf("the agent logged: %s", l)
		}
	}
}

// workloadTar is lpworkload's image as a tar stream, for `docker import`.
func workloadTar(t *testing.T) *bytes.Reader {
	t.Helper()
	return bytes.NewReader(testharness.WorkloadImage(t))
}

// boxInit mounts the cgroup v1 hierarchies in the box's own cgroup
// namespace, each as the kernel groups its controllers (systemd would mount
// cpu and cpuacct together, which fails where the machine has them apart,
// and would leave both out), then starts systemd. On a cgroup v2 machine it
// mounts nothing: systemd mounts the unified hierarchy itself.
const boxInit = `#!/bin/sh
set -e
if [ "$(stat -f -c %T /sys/fs/cgroup)" != cgroup2fs ]; then
  mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
  awk '$1 !~ /^#/ && $2 != 0 && $4 == 1 { c[$2] = c[$2] ? c[$2] "," $1 : $1 } END { for (h in c) print c[h] }' /proc/cgroups |
  while read -r ctrls; do
    mkdir -p "/sys/fs/cgroup/$ctrls"
    mount -t cgroup -o "$ctrls" cgroup "/sys/fs/cgroup/$ctrls"
  done
  mkdir -p /sys/fs/cgroup/systemd
  mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
fi
exec /sbin/init
`

// boxShare is where the box sees the test's shared directory: the box's
// engine socket for the test's docker CLI and docker-compose, and the
// agents' configuration files.
const boxShare = "/lpshare"

// testBox is a Debian host in a container of a private engine: systemd as
// PID 1, Debian's dockerd (data root /var/lib/docker, socket
// /var/run/docker.sock, as a user's host has them), confined to one CPU at a
// low weight so that its load leaves the rest of the machine to the other
// tests.
type testBox struct {
	name   string
	outer  []string // environment of the docker CLI for the outer engine
	inner  []string // ... and for the box's own engine
	share  string   // the shared directory, on this machine
	docker string
	bin    string // layerprobe as `make build` builds it (no test hooks)
	// workload is lpworkload in the box, for its armcg watcher.
	workload string
	// spinners are the busy loops' containers (loadBox).
	spinners []string
}

// dockerIn runs the docker CLI against the box's engine.
func (b *testBox) dockerIn(t *testing.T, timeout time.Duration, args ...string) cmdResult {
	t.Helper()
	return run(t, timeout, "", b.inner, b.docker, args...)
}

// unitPID returns a function that gives the main PID of layerprobe.service
// in the box, or 0 while it has none.
func (b *testBox) unitPID(t *testing.T) func() int {
	return func() int {
		r := b.exec(t, time.Minute, "systemctl", "show", "-p", "MainPID", "--value", "layerprobe")
		n, _ := strconv.Atoi(strings.TrimSpace(r.stdout))
		return n
	}
}

// containerPID gives the PID, in the box, of the process of a container of
// the box's engine, or 0 while it has none.
func (b *testBox) containerPID(t *testing.T, name string) int {
	r := b.dockerIn(t, time.Minute, "inspect", "-f", "{{.State.Pid}}", name)
	n, _ := strconv.Atoi(strings.TrimSpace(r.stdout))
	return n
}

// exec runs a command in the box.
func (b *testBox) exec(t *testing.T, timeout time.Duration, args ...string) cmdResult {
	t.Helper()
	return run(t, timeout, "", b.outer, b.docker, append([]string{"exec", b.name}, args...)...)
}

// startBox makes the box's root file system from a copy of the Debian root
// (testharness.DebianRoot, debootstrap's), imports it into a private
// engine and boots it.
func startBox(t *testing.T) *testBox {
	t.Helper()
	docker := tool(t, "docker")
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	tmp := t.TempDir()
	b := &testBox{name: "lpops-box", outer: []string{"DOCKER_HOST=" + d.Host}, share: filepath.Join(tmp, "share"), docker: docker}
	b.inner = []string{"DOCKER_HOST=unix://" + filepath.Join(b.share, "docker.sock")}

	start := time.Now()
	debian := testharness.DebianRoot(t)
	root := filepath.Join(tmp, "root")
	// Without the VM guest's part of the Debian root, which a container
	// host does not boot (the kernel and its modules), and without
	// documentation and locales, which nothing in the box reads.
	testharness.CopyTree(t, debian, root, "boot", "usr/lib/modules", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info")
	t.Logf("the box's root from the Debian root: %s", time.Since(start).Round(time.Second))
	for p, content := range map[string]string{
		// Masked: sshd (the guest's; the box shares this machine's
		// network and port 22) and udev (a container's /sys is read-only).
		"etc/systemd/system/ssh.service":                  "",
		"etc/systemd/system/ssh.socket":                   "",
		"etc/systemd/system/systemd-udevd.service":        "",
		"etc/systemd/system/systemd-udev-trigger.service": "",
		"etc/systemd/system/systemd-udevd-control.socket": "",
		"etc/systemd/system/systemd-udevd-kernel.socket":  "",
		// The engine: no default bridge and no iptables (the box shares
		// this machine's network; a compose project's network is a bridge
		// of its own, its port published by docker-proxy), and a second
		// socket in the shared directory.
		"etc/docker/daemon.json":                     `{"bridge": "none", "iptables": false, "ip6tables": false, "storage-driver": "overlay2"}` + "\n",
		"etc/systemd/system/docker.socket.d/lp.conf": "[Socket]\nListenStream=" + boxShare + "/docker.sock\n",
		"usr/local/sbin/lp-box-init":                 boxInit,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if content == "" {
			if err := os.Symlink("/dev/null", filepath.Join(root, p)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(b.share, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, testharness.WorkloadBinary(t), filepath.Join(b.share, "lpworkload"), 0o755)
	b.workload = boxShare + "/lpworkload"
	tarInto(t, b.outer, docker, root, nil, "import", "--change", `CMD ["/usr/local/sbin/lp-box-init"]`, "-", "layerprobe-box:test")

	// Every capability but CAP_SYS_RESOURCE, which a restricted root may
	// lack (--privileged asks for all); its own cgroup namespace, where
	// lp-box-init mounts the hierarchies writable; the engine's data root
	// on this machine's disk (overlay2 cannot stack on the box's own
	// overlay root); one CPU, at a quarter of the default weight, so
	// that the box's busy loop takes from the tests beside it only what
	// they leave.
	dataRoot := filepath.Join(tmp, "docker")
	if err := os.MkdirAll(dataRoot, 0o711); err != nil {
		t.Fatal(err)
	}
	r := run(t, time.Minute, "", b.outer, docker, "run", "-d", "--name", b.name, "--hostname", "lpbox",
		"--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
		"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--cgroupns", "private", "--device-cgroup-rule", "a *:* rwm", "--cpuset-cpus", "0", "--cpu-shares", "256",
		"--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp",
		"-v", dataRoot+":/var/lib/docker", "-v", b.share+":"+boxShare,
		"--network", "host", "-e", "container=docker", "layerprobe-box:test")
	if r.err != nil {
		t.Fatalf("docker run (the box):\n%s", r)
	}
	t.Cleanup(func() {
		run(t, 2*time.Minute, "", b.outer, docker, "exec", b.name, "systemctl", "poweroff")
		run(t, 2*time.Minute, "", b.outer, docker, "rm", "-f", "-v", b.name)
	})
	// is-system-running needs systemd's bus, which comes up a moment
	// after the container starts.
	var state cmdResult
	testharness.Eventually(t, 3*time.Minute, time.Second, "systemd in the box to finish booting", func() (bool, string) {
		if st := run(t, time.Minute, "", b.outer, docker, "inspect", "-f", "{{.State.Status}}", b.name); strings.TrimSpace(st.stdout) != "running" {
			t.Fatalf("the box is %s:\n%s", st.stdout, run(t, time.Minute, "", b.outer, docker, "logs", b.name))
		}
		state = b.exec(t, 3*time.Minute, "systemctl", "is-system-running", "--wait")
		switch st := strings.TrimSpace(state.stdout); st {
		case "", "offline", "starting", "initializing": // no bus yet, or booting
			return false, state.String()
		}
		return true, ""
	})
	if st := strings.TrimSpace(state.stdout); st != "running" {
		t.Fatalf("systemd in the box: %q\n%s", st, b.exec(t, time.Minute, "systemctl", "--failed", "--no-pager").stdout)
	}
	if r := b.dockerIn(t, time.Minute, "info", "--format", "{{.Driver}} {{.DockerRootDir}}"); strings.TrimSpace(r.stdout) != "overlay2 /var/lib/docker" {
		t.Fatalf("the box's dockerd: %s", r)
	}
	t.Logf("the box booted: %s", time.Since(start).Round(time.Second))
	// The agent image, from the repository's Dockerfile, on the box's
	// root file system as its Debian base, without what an agent image
	// never runs: the engine's own binaries and apt's lists (the
	// Dockerfile's apt-get update fetches them again). About 280 MiB
	// instead of 626 imported into the box's engine.
	tarInto(t, b.inner, docker, root, []string{"usr/sbin/dockerd", "usr/sbin/docker-proxy", "usr/sbin/runc", "usr/bin/docker", "usr/bin/docker-init",
		"usr/bin/containerd*", "usr/bin/ctr", "var/lib/apt/lists"}, "import", "-", "layerprobe-base:test")
	t.Logf("the agent image's base imported: %s", time.Since(start).Round(time.Second))
	ctx := filepath.Join(tmp, "context")
	if err := os.MkdirAll(filepath.Join(ctx, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "layerprobe")
	if err := testharness.Build(context.Background(), bin, testharness.ReleaseTags); err != nil {
		t.Fatalf("build the release binary: %v", err)
	}
	b.bin = bin
	copyFile(t, bin, filepath.Join(ctx, "bin", "layerprobe"), 0o755)
	if r := b.dockerIn(t, 8*time.Minute, "build", "--network", "host", "--build-arg", "BASE_IMAGE=layerprobe-base:test",
		"-f", repoPath("deploy/docker/Dockerfile"), "-t", "layerprobe:local", ctx); r.err != nil {
		t.Fatalf("docker build:\n%s", testharness.Tail(r.stdout+r.stderr, 30))
	}
	t.Logf("the agent image built: %s", time.Since(start).Round(time.Second))
	return b
}

// tarInto streams dir as a tar archive (testharness.TarCommand, without
// the paths in exclude) into `docker args...` (an import).
func tarInto(t *testing.T, env []string, docker, dir string, exclude []string, args ...string) {
	t.Helper()
	tarCmd := testharness.TarCommand(dir, exclude...)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	imp := exec.Command(docker, args...)
	imp.Env = append(os.Environ(), env...)
	imp.Stdin = pipe
	if err := tarCmd.Start(); err != nil {
		t.Fatal(err)
	}
	out, err := imp.CombinedOutput()
	if werr := tarCmd.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// loadBox starts one busy loop per CPU of the box in containers of its
// engine, and pauses them: checkLoadedAgent runs them only while an
// agent's cycle runs, not while a deployment installs (which needs no
// load, and the tests beside this one get the CPU).
func loadBox(t *testing.T, b *testBox) {
	t.Helper()
	imp := exec.Command(b.docker, "import", "-", "lpworkload:spin")
	imp.Env = append(os.Environ(), b.inner...)
	imp.Stdin = workloadTar(t)
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("import lpworkload into the box: %v\n%s", err, out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(b.exec(t, time.Minute, "nproc").stdout))
	if err != nil || n < 1 {
		t.Fatalf("nproc in the box: %v", err)
	}
	for i := range n {
		if r := b.dockerIn(t, time.Minute, "run", "-d", "--network", "none", "--name", fmt.Sprintf("spin%d", i),
			"lpworkload:spin", testharness.WorkloadEntrypoint, "spin"); r.err != nil {
			t.Fatalf("start a busy loop:\n%s", r)
		}
		b.spinners = append(b.spinners, fmt.Sprintf("spin%d", i))
	}
	// Removed before the box stops: a paused container's processes are
	// frozen, and a frozen process outlives SIGKILL.
	t.Cleanup(func() {
		b.dockerIn(t, time.Minute, append([]string{"unpause"}, b.spinners...)...)
		b.dockerIn(t, time.Minute, append([]string{"rm", "-f"}, b.spinners...)...)
	})
	b.spin(t, false)
	t.Logf("%d busy loop(s) on the box's %d CPU(s)", n, n)
}

// spin unpauses (on) or pauses the box's busy loops.
func (b *testBox) spin(t *testing.T, on bool) {
	t.Helper()
	verb := "pause"
	if on {
		verb = "unpause"
	}
	if r := b.dockerIn(t, time.Minute, append([]string{verb}, b.spinners...)...); r.err != nil {
		t.Fatalf("docker %s (the busy loops):\n%s", verb, r)
	}
}

// agentAPI reads an agent's API on this machine's loopback (the box and
// every deployment in it share its network).
func agentAPI(addr string) func(path string) ([]byte, error) {
	c := &http.Client{Timeout: 30 * time.Second}
	return func(path string) ([]byte, error) {
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return b, err
	}
}

// checkLoadedAgent watches the arms of the agent whose PID pid returns
// while its first steady cycle runs, and checks that cycle
// (checkArmCgroups, checkLoadedAA, its metric and its log).
func checkLoadedAgent(t *testing.T, b *testBox, addr string, pid func() int, alive func() string, log func() string) {
	t.Helper()
	b.spin(t, true)
	defer b.spin(t, false)
	get := agentAPI(addr)
	start := time.Now()
	arms := watchArms(t, b, strings.ReplaceAll(t.Name(), "/", "-"), pid)
	waitFirstSteadyCycle(t, 12*time.Minute, get, alive)
	t.Logf("first steady cycle under load: %s", time.Since(start).Round(time.Second))
	checkArmCgroups(t, arms())
	var engines api.EnginesResponse
	var overhead api.OverheadResponse
	body, err := get("/api/v1/engines")
	if err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, "/api/v1/engines", body, &engines)
	if body, err = get("/api/v1/overhead"); err != nil {
		t.Fatal(err)
	}
	decodeJSON(t, "/api/v1/overhead", body, &overhead)
	checkLoadedAA(t, engines, overhead)
	if body, err := get("/metrics"); err != nil || !strings.Contains(string(body), `layerprobe_host_arm_cgroup_joined{engine="default"} 1`) {
		t.Errorf("/metrics lacks layerprobe_host_arm_cgroup_joined{engine=\"default\"} 1 (%v)", err)
	}
	noJoinWarning(t, log())
}

// TestShippedDeploymentsUnderLoad runs each shipped deployment as shipped,
// one after the other, on a Debian host (testBox) whose CPU is kept busy
// by containers of its engine:
//   - deploy/systemd/layerprobe.service, unchanged, under the box's systemd
//     (`systemctl enable --now`);
//   - the .deb of `make release`, installed with `apt-get install`, its
//     unit started by the package (the same unit file);
//   - deploy/compose/docker-compose.yml with Docker Compose v2 (`docker
//     compose`), its agent service only, with an override that sets the
//     test's configuration file, published on a free port (LAYERPROBE_PORT);
//   - the pod of deploy/kubernetes/20-daemonset.yaml with `docker run`,
//     every flag derived from the manifest (asshipped.RunFlags), in a
//     cgroup namespace of its own, as a kubelet's runtime gives a pod on
//     cgroup v2: the host arm joins from there (cgroup.Of enters the
//     probe's namespace with the pod's CAP_SYS_ADMIN).
//
// Each agent's first cycle must have its host arm in the probe container's
// CPU cgroups, say so on /metrics, log no warning about it and read the
// bind target as fast as the host (checkLoadedAA).
func TestShippedDeploymentsUnderLoad(t *testing.T) {
	needsSystem(t)
	queue.Parallel(t)
	dc := composeV2(t)
	b := startBox(t)
	loadBox(t, b)

	t.Run("systemd", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", testharness.MustFreePort(t))
		// What the unit's comment tells a user to do.
		if r := b.exec(t, time.Minute, "mkdir", "-p", "/etc/layerprobe"); r.err != nil {
			t.Fatal(r)
		}
		agentConfigFile(t, b.share, addr)
		copyFile(t, b.bin, filepath.Join(b.share, "layerprobe"), 0o755)
		copyFile(t, repoPath(unitFile), filepath.Join(b.share, "layerprobe.service"), 0o644)
		// The binary goes where the unit's ExecStart= runs it.
		exe := strings.Fields(strings.Join(unitDirectives(t, repoPath(unitFile))["Service.ExecStart"], " "))
		if len(exe) == 0 || !filepath.IsAbs(exe[0]) {
			t.Fatalf("ExecStart=%v", exe)
		}
		for _, c := range [][]string{
			{"install", "-m", "0755", boxShare + "/layerprobe", exe[0]},
			{"install", "-m", "0644", boxShare + "/layerprobe.service", "/etc/systemd/system/"},
			{"install", "-m", "0644", boxShare + "/config.yaml", "/etc/layerprobe/config.yaml"},
		} {
			if r := b.exec(t, time.Minute, c...); r.err != nil {
				t.Fatal(r)
			}
		}
		if r := b.exec(t, time.Minute, "systemctl", "daemon-reload"); r.err != nil {
			t.Fatal(r)
		}
		if r := b.exec(t, time.Minute, "systemctl", "enable", "--now", "layerprobe"); r.err != nil {
			t.Fatalf("systemctl enable --now layerprobe:\n%s", r)
		}
		journal := func() string {
			return b.exec(t, time.Minute, "journalctl", "-u", "layerprobe", "--no-pager").stdout
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("journal of layerprobe.service:\n%s", testharness.Tail(journal(), 40))
			}
			b.exec(t, 2*time.Minute, "systemctl", "disable", "--now", "layerprobe")
			b.exec(t, time.Minute, "rm", "-rf", "/var/lib/layerprobe", "/etc/systemd/system/layerprobe.service", "/etc/layerprobe")
			b.exec(t, time.Minute, "systemctl", "daemon-reload")
		})
		alive := func() string {
			if r := b.exec(t, time.Minute, "systemctl", "is-active", "layerprobe"); strings.TrimSpace(r.stdout) != "active" {
				return "layerprobe.service is " + strings.TrimSpace(r.stdout) + "\n" + testharness.Tail(journal(), 20)
			}
			return ""
		}
		checkLoadedAgent(t, b, addr, b.unitPID(t), alive, journal)
	})

	// The .deb of `make release`, installed with apt as a user would, its
	// configuration put in place beforehand (dpkg keeps it: --force-confold).
	// Its postinst enables and starts the unit it carries.
	t.Run("deb", func(t *testing.T) {
		deb := filepath.Join(releaseDist(t), fmt.Sprintf("layerprobe_%s_%s.deb", versionFile(t), runtime.GOARCH))
		copyFile(t, deb, filepath.Join(b.share, "layerprobe.deb"), 0o644)
		addr := fmt.Sprintf("127.0.0.1:%d", testharness.MustFreePort(t))
		agentConfigFile(t, filepath.Join(b.share, "deb"), addr)
		if r := b.exec(t, time.Minute, "install", "-D", "-m", "0644", boxShare+"/deb/config.yaml", "/etc/layerprobe/config.yaml"); r.err != nil {
			t.Fatal(r)
		}
		start := time.Now()
		r := b.exec(t, 5*time.Minute, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends",
			"-o", "Dpkg::Options::=--force-confold", boxShare+"/layerprobe.deb")
		if r.err != nil {
			t.Fatalf("apt-get install ./layerprobe.deb:\n%s", r)
		}
		journal := func() string {
			return b.exec(t, time.Minute, "journalctl", "-u", "layerprobe", "--no-pager").stdout
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("journal of layerprobe.service:\n%s", testharness.Tail(journal(), 40))
			}
			b.exec(t, 3*time.Minute, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "purge", "-y", "layerprobe")
			b.exec(t, time.Minute, "rm", "-rf", "/var/lib/layerprobe")
		})
		for _, c := range [][]string{{"is-enabled", "layerprobe"}, {"is-active", "layerprobe"}} {
			if r := b.exec(t, time.Minute, append([]string{"systemctl"}, c...)...); r.err != nil {
				t.Fatalf("systemctl %v after the install: %s", c, r)
			}
		}
		if r := b.exec(t, time.Minute, "systemctl", "show", "-p", "FragmentPath", "layerprobe"); !strings.Contains(r.stdout, "/lib/systemd/system/layerprobe.service") {
			t.Errorf("the running unit is not the package's: %s", r.stdout)
		}
		alive := func() string {
			if r := b.exec(t, time.Minute, "systemctl", "is-active", "layerprobe"); strings.TrimSpace(r.stdout) != "active" {
				return "layerprobe.service is " + strings.TrimSpace(r.stdout) + "\n" + testharness.Tail(journal(), 20)
			}
			return ""
		}
		checkLoadedAgent(t, b, addr, b.unitPID(t), alive, journal)
		if d := time.Since(start); d > 10*time.Minute {
			t.Errorf("the first steady result came %s after apt-get install, want within 10 minutes", d.Round(time.Second))
		}
		t.Logf("apt-get install to the first steady result: %s", time.Since(start).Round(time.Second))
	})

	t.Run("compose", func(t *testing.T) {
		port := testharness.MustFreePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		dir := filepath.Join(b.share, "compose")
		agentConfigFile(t, dir, ":9811")
		// The override sets the test's agent configuration; the published
		// port is LAYERPROBE_PORT (docker-proxy listens on this machine's
		// loopback, the box's network).
		override := filepath.Join(t.TempDir(), "override.yml")
		if err := os.WriteFile(override, []byte(fmt.Sprintf(`services:
  layerprobe:
    volumes:
      - %s/compose/config.yaml:/etc/layerprobe/config.yaml:ro
`, boxShare)), 0o644); err != nil {
			t.Fatal(err)
		}
		compose := func(timeout time.Duration, args ...string) cmdResult {
			t.Helper()
			return run(t, timeout, repoPath("deploy/compose"), append(b.inner, "COMPOSE_PROJECT_NAME=lpops", fmt.Sprintf("LAYERPROBE_PORT=%d", port)), dc[0],
				append(append(dc[1:], "--file", "docker-compose.yml", "--file", override), args...)...)
		}
		if r := compose(3*time.Minute, "up", "-d", "--no-deps", "--no-build", "layerprobe"); r.err != nil {
			t.Fatalf("docker compose up:\n%s", r)
		}
		logs := func() string { return compose(time.Minute, "logs", "--no-color", "layerprobe").stdout }
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("agent log:\n%s", testharness.Tail(logs(), 40))
			}
			compose(3*time.Minute, "down", "--volumes", "--timeout", "60")
		})
		alive := func() string {
			r := compose(time.Minute, "ps", "--services", "--filter", "status=running")
			if !strings.Contains(r.stdout, "layerprobe") {
				return "the layerprobe service is not running:\n" + testharness.Tail(logs(), 20)
			}
			return ""
		}
		pid := func() int {
			id := strings.TrimSpace(compose(time.Minute, "ps", "-q", "layerprobe").stdout)
			if id == "" {
				return 0
			}
			return b.containerPID(t, id)
		}
		checkLoadedAgent(t, b, addr, pid, alive, logs)
	})

	t.Run("daemonset", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", testharness.MustFreePort(t))
		cfgDir := filepath.Join(b.share, "configmap")
		agentConfigFile(t, cfgDir, addr)
		pod := asshipped.DaemonSetPod(t, repoPath("deploy/kubernetes/20-daemonset.yaml"))
		flags, image, podArgs := asshipped.RunFlags(t, pod, map[string]string{"layerprobe-config": boxShare + "/configmap"}, asshipped.CgroupNSPrivate)
		args := append(append(append([]string{"run", "-d", "--name", "lpops-daemonset", "--network", "host"}, flags...), image), podArgs...)
		if r := b.dockerIn(t, 2*time.Minute, args...); r.err != nil {
			t.Fatalf("docker run (the DaemonSet's pod):\n%s", r)
		}
		logs := func() string { return b.dockerIn(t, time.Minute, "logs", "lpops-daemonset").stderr }
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("agent log:\n%s", testharness.Tail(logs(), 40))
			}
			b.dockerIn(t, 2*time.Minute, "stop", "-t", "60", "lpops-daemonset")
			b.dockerIn(t, time.Minute, "rm", "-f", "-v", "lpops-daemonset")
			b.exec(t, time.Minute, "rm", "-rf", "/var/lib/layerprobe")
		})
		alive := func() string {
			if st := strings.TrimSpace(b.dockerIn(t, time.Minute, "inspect", "-f", "{{.State.Status}}", "lpops-daemonset").stdout); st != "running" {
				return "the pod's container is " + st + ":\n" + testharness.Tail(logs(), 20)
			}
			return ""
		}
		pid := func() int { return b.containerPID(t, "lpops-daemonset") }
		checkLoadedAgent(t, b, addr, pid, alive, logs)
	})
}
