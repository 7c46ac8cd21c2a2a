package vm

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probeimage"
	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/layerprobe/layerprobe/internal/testsupport/testvm"
)

// v2Cmdline boots the guest's systemd on the unified hierarchy. Debian
// 12's systemd does so by default; the test says so rather than rely on it.
const v2Cmdline = "systemd.unified_cgroup_hierarchy=1"

// v2RunConfig is the pod's configuration in the join check: the host arm
// and bind (one probe container), random writes (fio, the host arm that
// joins), the smoke profile's tiny executions, since every instruction of
// the guest is emulated.
const v2RunConfig = `profile: smoke
targets: [bind]
workloads: [randwrite]
`

// TestJoinOnCgroupV2 boots the Debian guest on the unified hierarchy
// (cgroup v2, Docker's default of a private cgroup namespace per
// container) and runs `layerprobe run` there in a container started as the
// DaemonSet's pod is on a cgroup v2 node: `docker run --cgroupns private`
// with every other flag derived from the manifest (asshipped.RunFlags: the
// host's PID namespace, the engine's socket, /sys/fs/cgroup read-write,
// the capabilities). The run must say its host arm joined the probe
// container's cgroup, and the host arm's fio, watched in the guest's /proc
// while it ran (lpworkload armcg), must have run in the probe container's
// cgroup. The full deployments under load are the benchmark's cgroupv2
// section.
func TestJoinOnCgroupV2(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testharness.SkipOrFail(t, "needs root (debootstrap, QEMU's 9p share as root)")
	}
	start := time.Now()
	g := testvm.Boot(t, testvm.BuildImage(t), testvm.Options{Cmdline: v2Cmdline})
	r := g.Run(time.Minute, "stat -f -c %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.controllers; docker info --format '{{.CgroupVersion}} {{.CgroupDriver}}'")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Err != nil || len(lines) != 3 || lines[0] != "cgroup2fs" || !strings.Contains(" "+lines[1]+" ", " cpu ") || lines[2] != "2 systemd" {
		t.Fatalf("the guest is not on cgroup v2 with the cpu controller and Docker on it (file system, controllers, Docker's cgroup version and driver):\n%s", r)
	}

	image := importAgentImage(t, g)
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
	argv := append(append([]string{"docker", "run", "-d", "--name", "lpjoin", "--network", "host"}, flags...),
		image, "run", "--config", "/etc/layerprobe/config.yaml", "--rounds", "2", "--output", "json")
	t.Logf("the pod: %s", strings.Join(argv, " "))
	if r := g.Exec(2*time.Minute, argv...); r.Err != nil {
		t.Fatalf("docker run (the DaemonSet's pod):\n%s", r)
	}
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
		watched <- g.Exec(30*time.Minute, filepath.Join(g.Share, "lpworkload"), "armcg", strconv.Itoa(pid), out, stop)
	}()
	runStart := time.Now()
	if r := g.Exec(15*time.Minute, "docker", "wait", "lpjoin"); r.Err != nil || strings.TrimSpace(r.Stdout) != "0" {
		logs := g.Exec(time.Minute, "docker", "logs", "lpjoin")
		t.Fatalf("layerprobe run in the pod: exit %s (%v)\n%s", strings.TrimSpace(r.Stdout), r.Err, testharness.Tail(logs.Stderr, 30))
	}
	t.Logf("layerprobe run in the pod: %s", time.Since(runStart).Round(time.Second))
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := <-watched; r.Err != nil {
		t.Fatalf("lpworkload armcg:\n%s", r)
	}
	logs := g.Exec(time.Minute, "docker", "logs", "lpjoin")
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
	t.Logf("the join on cgroup v2: %s in all (the guest booted in %s)", time.Since(start).Round(time.Second), g.Booted.Round(time.Second))
}

// importAgentImage imports the agent's image into the guest's engine and
// returns its name: this machine's fio (Debian 12's, as the guest's) with
// every library it loads, and the layerprobe binary, as
// deploy/docker/Dockerfile installs them (/usr/bin/fio, /usr/bin/layerprobe
// as the entrypoint). Made from the files probeimage collects for a probe
// image, without apt: a Debian base and its package lists would take
// minutes to import and update in the emulated guest.
func importAgentImage(t *testing.T, g *testvm.Guest) string {
	t.Helper()
	im, err := probeimage.Build(testharness.RequireFio(t), binary)
	if err != nil {
		t.Fatal(err)
	}
	var files []probeimage.File
	for _, f := range im.Files {
		switch {
		case f.Path == probeimage.FioPath:
			f.Path = "/usr/bin/fio"
		case f.Path == probeimage.HelperPath:
			f.Path = "/usr/bin/layerprobe"
		case f.Path == "/lp" || strings.HasPrefix(f.Path, "/lp/"):
			continue
		}
		files = append(files, f)
	}
	for _, d := range []string{"/usr", "/usr/bin", "/var", "/var/lib", "/var/lib/layerprobe", "/etc/layerprobe", "/run", "/run/lock"} {
		files = append(files, probeimage.File{Path: d, Mode: fs.ModeDir | 0o755})
	}
	seen := map[string]bool{}
	im.Files = im.Files[:0]
	for _, f := range files {
		if !seen[f.Path] {
			seen[f.Path] = true
			im.Files = append(im.Files, f)
		}
	}
	tarPath := filepath.Join(g.Share, "agent-image.tar")
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
	start := time.Now()
	const name = "layerprobe:v2test"
	if r := g.Exec(10*time.Minute, "docker", "import", "--change", `ENTRYPOINT ["/usr/bin/layerprobe"]`, "--change", "WORKDIR /var/lib/layerprobe", tarPath, name); r.Err != nil {
		t.Fatalf("docker import (the agent's image):\n%s", r)
	}
	t.Logf("the agent's image imported into the guest: %s", time.Since(start).Round(time.Second))
	_ = os.Remove(tarPath)
	return name
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
