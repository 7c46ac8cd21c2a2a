//go:build linux

// Package kube installs the Helm chart on a real single-node Kubernetes
// cluster (internal/testsupport/testkube: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and the kubelet at the release
// tools/kube/go.mod pins, on a private containerd with its CRI plugin) as
// the README's Helm section says, with the image `make release` writes,
// and the Prometheus Operator kube-prometheus-stack would run.
//
// Needs root, containerd, runc, ctr, Debian's containernetworking-plugins
// helm, the Prometheus Operator and the Prometheus it runs
// (scripts/install-deps.sh builds them into /opt/layerprobe-test-tools)
// and the Kubernetes binaries (scripts/build-kube.sh, which `make
// deps-test` runs; the test runs it too when its cache is cold). Skipped
// with -short or without them; failing instead when CI is set.
package kube

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/layerprobe/layerprobe/internal/testsupport/testkube"
)

// repoRoot is the repository's top directory.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}()

func repoPath(p string) string { return filepath.Join(repoRoot, filepath.FromSlash(p)) }

// promOperatorVersion is the Prometheus Operator whose CRDs (PodMonitor,
// ServiceMonitor, PrometheusRule) the cluster gets before the chart, as a
// kube-prometheus-stack cluster has them: the README's install enables
// the monitor and the rules. The newest release the Go module proxy
// serves of its main module (later ones only of pkg/apis/monitoring).
const promOperatorVersion = "v0.85.0"

// registry is the README's registry. Nothing is pushed or pulled: the image
// is imported into the node's containerd under the name the chart gives it.
const registry = "registry.example.com"

// testConfig is the test's configuration beside the README's values (and
// the private containerd's socket and root, and a state directory inside
// the cluster): a smoke configuration whose first cycle ends within minutes on a loaded
// machine (six rounds: the intervals' minimum; no quiet period, since the
// kubelet's own containers are churn; no pressure or byte limits).
const testConfig = `config:
  profile: smoke
  agent:
    interval: 1h
    jitter: 0
    budget:
      rounds: 6
      max_bytes: 0
    daily_byte_budget: 4GiB
    max_io_pressure: 100
    max_disk_util: 1
    churn_quiet_period: 0s
`

func TestMain(m *testing.M) {
	code := m.Run()
	testharness.RemoveBinary()
	os.Exit(code)
}

// TestHelmChartOnKubernetes: the chart, installed as the README says with
// engine.type=containerd on a labelled node, runs the agent as a
// DaemonSet pod that measures the node's containerd (overlayfs): the
// Service answers /api/v1/engines and /api/v1/overhead through the API
// server's service proxy, and `layerprobe overhead` reads the pod through
// `kubectl port-forward`. `helm upgrade` with another configuration rolls
// the pod; `helm uninstall` leaves no probe container in any namespace of
// the node's containerd.
func TestHelmChartOnKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs root, a Kubernetes cluster and real tools")
	}
	testkube.Require(t)
	helm := tool(t, "helm", "/opt/layerprobe-test-tools/bin")
	version := strings.TrimSpace(readFile(t, repoPath("VERSION")))
	start := time.Now()
	bin := agentBinary(t)
	crds := operatorCRDs(t)
	operator, reloader, promBin := operatorTools(t)
	// The image builds while the cluster starts.
	type built struct {
		file string
		err  error
	}
	images := make(chan built, 1)
	dist := t.TempDir()
	go func() {
		f, err := agentImage(dist, version)
		images <- built{f, err}
	}()

	// The chart mounts /run/containerd/fifo (containerd's clients' FIFOs)
	// when the socket is elsewhere, as here: the kubelet makes it on the
	// machine, and the test removes what it made.
	for _, d := range []string{"/run/containerd", "/run/containerd/fifo"} {
		if _, err := os.Stat(d); err != nil {
			t.Cleanup(func() { _ = os.Remove(d) }) // LIFO: the fifo directory first
		}
	}
	c := testkube.Start(t)
	img := <-images
	if img.err != nil {
		t.Fatal(img.err)
	}
	t.Logf("cluster and agent image ready: %s", time.Since(start).Round(time.Second))
	c.ImportImage(img.file)
	// The README pushes the image to its registry; the node has it under
	// that name instead.
	imported := "docker.io/library/layerprobe:" + version
	ref := registry + "/layerprobe:" + version
	if out, err := c.Ctr(time.Minute, "k8s.io", "images", "tag", imported, ref); err != nil {
		t.Fatalf("ctr images tag %s %s: %v\n%s", imported, ref, err, out)
	}
	for _, f := range crds {
		c.MustKubectl("apply", "--server-side", "-f", f)
	}
	promImages, promVersion := prometheusImages(t, dist, promBin, reloader)
	for _, f := range promImages {
		c.ImportImage(f)
	}

	stateDir := filepath.Join(c.Dir, "layerprobe-state")
	values := filepath.Join(c.Dir, "test-values.yaml")
	if err := os.WriteFile(values, []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	helmEnv := []string{"KUBECONFIG=" + c.Kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(c.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(c.Dir, "helm", "config"),
		"HELM_DATA_HOME=" + filepath.Join(c.Dir, "helm", "data")}
	helmCmd := func(args ...string) string {
		t.Helper()
		out, err := runCmd(5*time.Minute, helmEnv, helm, args...)
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	// The README's Helm section, step by step.
	c.MustKubectl("create", "namespace", "layerprobe")
	c.MustKubectl("label", "namespace", "layerprobe", "pod-security.kubernetes.io/enforce=privileged")
	helmCmd("install", "layerprobe", repoPath("deploy/helm/layerprobe"), "--namespace", "layerprobe",
		"--set", "image.registry="+registry,
		"--set", "monitor.enabled=true", "--set", "monitor.labels.release=kube-prometheus-stack",
		"--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=kube-prometheus-stack",
		"--set", "dashboards.enabled=true",
		// The test's node: containerd's private socket and root.
		"--set", "engine.type=containerd",
		"--set", "engine.socket="+c.ContainerdSocket,
		"--set", "engine.dataRoot="+c.Containerd.DataRoot,
		"--set", "stateDir="+stateDir,
		"-f", values)
	// Without the node label the DaemonSet places no pod.
	time.Sleep(2 * time.Second)
	if pods := c.MustKubectl("get", "pods", "-n", "layerprobe", "-o", "name"); strings.TrimSpace(pods) != "" {
		t.Errorf("pods before the node is labelled: %s", pods)
	}
	c.MustKubectl("label", "node", testkube.NodeName, "layerprobe.io/containerd=true")

	// kube-prometheus-stack's Prometheus, run by the operator, while the
	// agent's pod starts.
	prom := startPrometheus(t, c, operator, promVersion)
	t.Logf("the operator's Prometheus ready %s after the start", time.Since(start).Round(time.Second))
	first := waitPod(t, c, "", 10*time.Minute)
	t.Logf("pod %s ready %s after the start", first.name, time.Since(start).Round(time.Second))
	defer func() {
		if t.Failed() {
			logs, _ := c.Kubectl(time.Minute, "logs", "-n", "layerprobe", "daemonset/layerprobe", "--tail", "40")
			t.Logf("agent log:\n%s", logs)
		}
	}()

	// Through the Service (the API server's service proxy to the pod).
	proxy := "/api/v1/namespaces/layerprobe/services/layerprobe:metrics/proxy"
	var engines api.EnginesResponse
	testharness.Eventually(t, 6*time.Minute, 2*time.Second, "the agent's engine reachable through the Service", func() (bool, string) {
		out, err := c.Kubectl(time.Minute, "get", "--raw", proxy+"/api/v1/engines")
		if err != nil {
			return false, err.Error()
		}
		if err := json.Unmarshal([]byte(out), &engines); err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		return len(engines.Engines) == 1 && engines.Engines[0].Reachable && engines.Engines[0].Driver != "", out
	})
	e := engines.Engines[0]
	if e.Name != "node" || e.Runtime != "containerd" || e.Driver != "overlayfs" || e.DriverClass != "supported" ||
		e.DataRoot != filepath.Join(c.Containerd.DataRoot, "io.containerd.snapshotter.v1.overlayfs") || e.Endpoint != "unix://"+c.ContainerdSocket {
		t.Errorf("engine %+v: want node, containerd's overlayfs (supported) in the snapshotter's root under %s on unix://%s", e, c.Containerd.DataRoot, c.ContainerdSocket)
	}

	var overhead api.OverheadResponse
	cycleStart := time.Now()
	testharness.Eventually(t, 10*time.Minute, 5*time.Second, "a successful cycle in /api/v1/overhead through the Service", func() (bool, string) {
		out, err := c.Kubectl(time.Minute, "get", "--raw", proxy+"/api/v1/overhead")
		if err != nil {
			return false, err.Error()
		}
		if err := json.Unmarshal([]byte(out), &overhead); err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		for _, eo := range overhead.Engines {
			if eo.Engine == "node" && eo.Mode == measure.ModeSteady && eo.LastSuccess != nil && len(eo.Results) > 0 {
				return true, ""
			}
		}
		return false, testharness.Tail(out, 5)
	})
	t.Logf("first cycle: %s", time.Since(cycleStart).Round(time.Second))
	targets := map[string]bool{}
	for _, eo := range overhead.Engines {
		if eo.Driver != "overlayfs" {
			t.Errorf("overhead of %s on driver %q, want overlayfs", eo.Engine, eo.Driver)
		}
		for _, r := range eo.Results {
			targets[string(r.Target)] = true
		}
	}
	if !targets["container"] || !targets["bind"] {
		t.Errorf("overhead targets %v, want container and bind (the chart's containerd targets)", targets)
	}

	// The probe container the agent keeps, in the kubelet's namespace.
	if probes := probeContainers(t, c); len(probes) == 0 {
		t.Errorf("no probe container (label io.layerprobe.managed) in the node's containerd while the agent runs")
	}

	// `layerprobe overhead` through a port-forward to the pod.
	port := portForward(t, c, first.name)
	out, err := runCmd(time.Minute, nil, bin, "overhead", "--url", fmt.Sprintf("http://127.0.0.1:%d", port))
	if err != nil || !strings.Contains(out, "overlayfs") || !strings.Contains(out, "container") {
		t.Errorf("layerprobe overhead through kubectl port-forward: %v\n%s", err, out)
	}

	// The operator found the PodMonitor (job: its namespace/name), and
	// loaded the PrometheusRule; the dashboards wait for Grafana's sidecar.
	waitScraped(t, prom, "PodMonitor", "layerprobe/layerprobe")
	checkRulesLoaded(t, c, prom)
	checkDashboards(t, c)

	// A changed configuration rolls the pod; the ServiceMonitor replaces
	// the PodMonitor (job: the Service's name).
	helmCmd("upgrade", "layerprobe", repoPath("deploy/helm/layerprobe"), "--namespace", "layerprobe",
		"--reuse-values", "--set", "config.agent.interval=2h", "--set", "monitor.kind=ServiceMonitor")
	second := waitPod(t, c, first.uid, 10*time.Minute)
	if second.uid == first.uid {
		t.Fatalf("helm upgrade with a new configuration kept pod %s", first.uid)
	}
	waitScraped(t, prom, "ServiceMonitor", "layerprobe")
	cm := c.MustKubectl("get", "configmap", "-n", "layerprobe", "layerprobe", "-o", "jsonpath={.data.config\\.yaml}")
	if !strings.Contains(cm, "interval: 2h") {
		t.Errorf("the ConfigMap after the upgrade:\n%s", cm)
	}

	// helm uninstall: the pod goes, and with it every probe container.
	helmCmd("uninstall", "layerprobe", "--namespace", "layerprobe", "--wait", "--timeout", "6m")
	testharness.Eventually(t, 6*time.Minute, 2*time.Second, "the agent's pod gone", func() (bool, string) {
		out, err := c.Kubectl(time.Minute, "get", "pods", "-n", "layerprobe", "-o", "name")
		return err == nil && strings.TrimSpace(out) == "", out
	})
	if probes := probeContainers(t, c); len(probes) > 0 {
		t.Errorf("probe containers left on the node after helm uninstall: %v", probes)
	}
}

// pod is an agent pod.
type pod struct{ name, uid string }

// waitPod waits for the DaemonSet's one pod, not notUID, to be Running and
// Ready, and for no other agent pod to remain.
func waitPod(t *testing.T, c *testkube.Cluster, notUID string, timeout time.Duration) pod {
	t.Helper()
	var p pod
	testharness.Eventually(t, timeout, 2*time.Second, "the agent's pod Running and Ready", func() (bool, string) {
		out, err := c.Kubectl(time.Minute, "get", "pods", "-n", "layerprobe", "-l", "app.kubernetes.io/name=layerprobe", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.phase} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}`)
		if err != nil {
			return false, err.Error()
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 1 {
			return false, out
		}
		f := strings.Fields(lines[0])
		if len(f) != 4 || f[1] == notUID || f[2] != "Running" || f[3] != "True" {
			return false, out
		}
		p = pod{f[0], f[1]}
		return true, ""
	})
	return p
}

// probeContainers lists the containers labelled io.layerprobe.managed in
// every namespace of the node's containerd.
func probeContainers(t *testing.T, c *testkube.Cluster) []string {
	t.Helper()
	nss, err := c.Ctr(time.Minute, "default", "namespaces", "ls", "-q")
	if err != nil {
		t.Fatalf("ctr namespaces ls: %v\n%s", err, nss)
	}
	var found []string
	for _, ns := range strings.Fields(nss) {
		out, err := c.Ctr(time.Minute, ns, "containers", "ls", "-q", `labels."io.layerprobe.managed"`)
		if err != nil {
			t.Fatalf("ctr -n %s containers ls: %v\n%s", ns, err, out)
		}
		for _, id := range strings.Fields(out) {
			found = append(found, ns+"/"+id)
		}
	}
	return found
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 9811`)

// portForward runs `kubectl port-forward` to the pod's metrics port on a
// local port of kubectl's choice, until the test ends, and returns the
// port.
func portForward(t *testing.T, c *testkube.Cluster, podName string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), "--kubeconfig", c.Kubeconfig,
		"port-forward", "-n", "layerprobe", "--address", "127.0.0.1", "pod/"+podName, ":9811")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testharness.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	ports := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				var p int
				fmt.Sscan(m[1], &p)
				ports <- p
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p := <-ports:
		return p
	case <-time.After(time.Minute):
		t.Fatalf("kubectl port-forward printed no port within a minute: %s", stderr.String())
	}
	return 0
}

// agentImage writes the agent's image into dist as `make release` does
// (scripts/release-index.sh: Debian's fio and the static release binary, as
// an OCI image layout) for this machine's platform alone.
func agentImage(dist, version string) (string, error) {
	arch := map[string]string{"amd64": "amd64_v1", "arm64": "arm64_v8.0"}[runtime.GOARCH]
	platform := map[string]string{"amd64": "amd64", "arm64": "arm64/v8"}[runtime.GOARCH]
	if arch == "" {
		return "", fmt.Errorf("no release image for %s", runtime.GOARCH)
	}
	stripped := filepath.Join(dist, "layerprobe_linux_"+arch, "layerprobe")
	if err := os.MkdirAll(filepath.Dir(stripped), 0o755); err != nil {
		return "", err
	}
	if err := testharness.BuildStripped(context.Background(), stripped); err != nil {
		return "", err
	}
	out := filepath.Join(dist, "layerprobe-"+version+".oci.tar")
	if o, err := runCmd(15*time.Minute, []string{"RELEASE_PLATFORMS=" + platform, "TMPDIR=" + dist},
		repoPath("scripts/release-index.sh"), dist, "layerprobe:"+version, version, out); err != nil {
		return "", fmt.Errorf("release-index.sh: %w\n%s", err, testharness.Tail(o, 30))
	}
	return out, nil
}

// operatorCRDs are the Prometheus Operator's CRDs (Prometheus,
// PodMonitor, ServiceMonitor, PrometheusRule and the rest the operator
// watches), from its module (the Go module proxy; the module cache keeps
// it).
func operatorCRDs(t *testing.T) []string {
	t.Helper()
	out, err := runCmd(5*time.Minute, []string{"GOFLAGS=-mod=mod"}, "go", "mod", "download", "-json",
		"github.com/prometheus-operator/prometheus-operator@"+promOperatorVersion)
	if err != nil {
		testharness.SkipOrFail(t, "go mod download prometheus-operator %s: %v\n%s", promOperatorVersion, err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal([]byte(out), &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("the operator's CRDs in %s: %v %v", mod.Dir, files, err)
	}
	return files
}

// agentBinary is the release layerprobe binary (with the test hooks), built
// once per test binary run.
func agentBinary(t *testing.T) string {
	t.Helper()
	bin, err := testharness.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runCmd runs a command in the repository root with env added to the
// test's environment and returns its combined output.
func runCmd(timeout time.Duration, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// tool finds an executable in PATH, the sbin directories or extraDirs, or
// skips (fails in CI).
func tool(t *testing.T, name string, extraDirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range append([]string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin", "/bin"}, extraDirs...) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	testharness.SkipOrFail(t, "%s not found (scripts/install-deps.sh installs it)", name)
	return ""
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
