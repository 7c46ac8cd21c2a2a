package vm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/layerprobe/layerprobe/internal/testsupport/testvm"
)

// v2RunConfig is the pod's configuration in the join check: the host arm
// and bind (one probe container), random writes (fio, the host arm that
// joins), the smoke profile's tiny executions, since every instruction of
// the guest is emulated. The engine is named with the socket's path under
// /run, which the pod mounts from the node (/var/run is a link to it on
// the node, and not in the probe image the pod runs here); fio is the
// probe image's.
const v2RunConfig = `profile: smoke
targets: [bind]
workloads: [randwrite]
fio:
  binary: ` + probeimage.FioPath + `
engines:
  - name: default
    host: unix:///run/docker.sock
`

// guestArmsPoll is how often the watcher scans the guest's /proc: a scan
// is tens of milliseconds of the emulated guest's CPU, which the arms
// compete for, and a host arm there lives seconds.
const guestArmsPoll = 100 * time.Millisecond

// testJoinOnCgroupV2 runs `layerprobe run` in the guest, on the unified
// hierarchy (cgroup v2, where Docker gives every container a cgroup
// namespace of its own by default), in a container started as the
// DaemonSet's pod is on a cgroup v2 node: `docker run --cgroupns private`
// with every other flag derived from the manifest (asshipped.RunFlags: the
// host's PID namespace, the engine's socket, /sys/fs/cgroup read-write,
// the capabilities). The run must say its host arm joined the probe
// container's cgroup, and the host arm's fio, watched in the guest's /proc
// while it ran (lpworkload armcg), must have run in the probe container's
// cgroup. The shipped deployments under load are the benchmark's cgroupv2
// section.
func testJoinOnCgroupV2(t *testing.T, g *testvm.Guest) {
	if err := g.CgroupV2(); err != nil {
		t.Fatal(err)
	}

	image := ensureProbeImage(t, g)
	copyTo(t, testharness.WorkloadBinary(t), filepath.Join(g.Share, "lpworkload"), 0o755)
	cfgDir := filepath.Join(g.Share, "configmap")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "config.yaml"), []byte(v2RunConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := asshipped.DaemonSetPod(t, repoPath(t, "deploy/kubernetes/20-daemonset.yaml"))
	flags, _, _ := asshipped.RunFlags(t, pod, map[string]string{"layerprobe-config": cfgDir}, nil, asshipped.CgroupNSPrivate)
	// The container would inherit the probe image's labels, and the
	// agent's sweep would take it for a leftover probe and remove it:
	// the label says it is not one.
	argv := append(append([]string{"docker", "run", "-d", "--name", "lpjoin", "--network", "host", "--entrypoint", probeimage.HelperPath,
		"--label", engine.LabelManaged + "=false"}, flags...),
		image, "run", "--config", "/etc/layerprobe/config.yaml", "--rounds", "2", "--output", "json")
	t.Logf("the pod: %s", strings.Join(argv, " "))
	if r := g.Exec(2*time.Minute, argv...); r.Err != nil {
		t.Fatalf("docker run (the DaemonSet's pod):\n%s", r)
	}
	t.Cleanup(func() { g.Exec(time.Minute, "docker", "rm", "-f", "lpjoin") })
	var pid int
	testharness.Eventually(t, time.Minute, time.Second, "the pod's PID", func() (bool, string) {
		r := g.Exec(time.Minute, "docker", "inspect", "-f", "{{.State.Pid}}", "lpjoin")
		pid, _ = strconv.Atoi(strings.TrimSpace(r.Stdout))
		return pid > 0, r.String()
	})
	// The watcher reads /proc from the guest's own cgroup namespace, the
	// host's: every path is a whole one.
	out, stop := filepath.Join(g.Share, "armcg.jsonl"), filepath.Join(g.Share, "armcg.stop")
	watched := make(chan testvm.Result, 1)
	go func() {
		watched <- g.Exec(30*time.Minute, filepath.Join(g.Share, "lpworkload"), "armcg", strconv.Itoa(pid), out, stop, guestArmsPoll.String())
	}()
	runStart := time.Now()
	r := g.Exec(20*time.Minute, "docker", "wait", "lpjoin")
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := g.Exec(time.Minute, "docker", "logs", "lpjoin")
	if r.Err != nil || strings.TrimSpace(r.Stdout) != "0" {
		t.Fatalf("layerprobe run in the pod: exit %s (%v)\n%s", strings.TrimSpace(r.Stdout), r.Err, testharness.Tail(logs.Stderr, 30))
	}
	t.Logf("layerprobe run in the pod: %s", time.Since(runStart).Round(time.Second))
	if r := <-watched; r.Err != nil {
		t.Fatalf("lpworkload armcg:\n%s", r)
	}
	var run report.Run
	if err := json.Unmarshal([]byte(logs.Stdout), &run); err != nil || len(run.Engines) != 1 {
		t.Fatalf("run JSON (%d engines): %v\n%s\n%s", len(run.Engines), err, logs.Stdout, testharness.Tail(logs.Stderr, 30))
	}
	e := run.Engines[0]
	if e.Error != nil {
		t.Fatalf("engine error: %+v", e.Error)
	}
	if e.HostArmCgroup != "joined" {
		t.Errorf("host_arm_cgroup %q (%s), want joined; warnings %q", e.HostArmCgroup, e.HostArmCgroupError, e.Warnings)
	}
	for _, res := range e.Results {
		if res.Target == measure.TargetBind {
			t.Logf("bind/%s: %+v", res.Workload, res.Overhead[measure.HeadlineMetric(res.Workload)])
		}
	}

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var procs []asshipped.ArmProcess
	dec := json.NewDecoder(strings.NewReader(string(b)))
	for dec.More() {
		var a asshipped.ArmProcess
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("armcg: %v", err)
		}
		procs = append(procs, a)
	}
	seen, problems := asshipped.ArmCgroupProblems(procs, "fio")
	t.Logf("host-arm processes checked: %d of fio (of %d processes seen)", seen["fio"], len(procs))
	for _, p := range problems {
		t.Error(p)
	}
	if t.Failed() {
		t.Logf("the pod's log:\n%s", testharness.Tail(logs.Stderr, 30))
	}
}

// ensureProbeImage makes sure the guest's engine has the probe image that
// layerprobe builds from this machine's fio (Debian 12's, as the guest's)
// and the test's binary, and returns its reference: the image an agent on
// this host imports into the guest (testEngineInVM's), and the one the
// pod's agent builds from the same files, which it finds there and reuses.
// The pod runs it as its own image, the binary as its entrypoint and the
// fio in it as the agent's fio: a 110 MiB import into the emulated guest
// took over six minutes of a loaded machine, and the agent's image, from
// deploy/docker/Dockerfile, would be another, then minutes of apt. Its
// labels are the ones the engine package gives a probe image.
func ensureProbeImage(t *testing.T, g *testvm.Guest) string {
	t.Helper()
	im, err := probeimage.Build(testharness.RequireFio(t), binary)
	if err != nil {
		t.Fatal(err)
	}
	ref := engine.ImageRepository + ":" + im.Digest[:12]
	if r := g.Exec(time.Minute, "docker", "image", "inspect", "-f", "{{index .Config.Labels \""+engine.LabelDigest+"\"}}", ref); strings.TrimSpace(r.Stdout) == im.Digest {
		t.Logf("the probe image %s is in the guest's engine already", ref)
		return ref
	}
	tarPath := filepath.Join(g.Share, "probe-image.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.WriteTar(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tarPath)
	start := time.Now()
	argv := []string{"docker", "import"}
	for _, l := range []string{engine.LabelManaged + "=true", engine.LabelRole + "=image", engine.LabelDigest + "=" + im.Digest} {
		argv = append(argv, "--change", "LABEL "+l)
	}
	if r := g.Exec(20*time.Minute, append(argv, tarPath, ref)...); r.Err != nil {
		t.Fatalf("docker import (the probe image):\n%s", r)
	}
	t.Logf("the probe image %s imported into the guest: %s", ref, time.Since(start).Round(time.Second))
	return ref
}

// repoPath is a path of the repository (test/vm's tests run in test/vm).
func repoPath(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "..", filepath.FromSlash(p)))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func copyTo(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(fmt.Errorf("copy %s: %w", from, err))
	}
}
