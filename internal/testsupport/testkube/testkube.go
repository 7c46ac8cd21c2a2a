//go:build linux

// Package testkube runs a single-node Kubernetes cluster for tests, from
// real components: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and the kubelet, built from their Go modules at the one
// release tools/kube/go.mod pins (scripts/build-kube.sh, cached outside
// the clone), on a private containerd with its CRI plugin (testdaemon),
// runc and the bridge plugin of Debian's containernetworking-plugins.
//
// Nothing is pulled: there is no registry. The pod sandbox image is a
// static pause binary built here; a test imports its own images into the
// k8s.io namespace (ImportImage). Every server listens on 127.0.0.1 but
// the API server, which listens on the address of the pods' bridge
// (BridgeAddress) so that pods reach it too (Prometheus' Kubernetes service
// discovery): the pods' network is a bridge of the cluster's own,
// PodSubnet, whose addresses live in network namespaces the cluster makes
// and which leaves the machine by no route. Everything
// lives in one directory under /tmp and goes with the test: the
// processes, their mounts, the bridge, and the kernel settings the kubelet
// changes (restored).
package testkube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

const (
	// NodeName is the node's name, and the host name the API server dials
	// the kubelet by (localhost: the kubelet serves on 127.0.0.1 only).
	NodeName = "localhost"
	// PodSubnet is the pods' addresses, on the bridge Bridge, whose own
	// address is the subnet's first.
	PodSubnet  = "10.217.0.0/24"
	bridgeCIDR = BridgeAddress + "/24"
	// BridgeAddress is the node's address on the pods' bridge, where the
	// API server listens.
	BridgeAddress = "10.217.0.1"
	// Bridge is the pods' bridge, made by the cluster and removed with it.
	Bridge = "lpkube0"
	// serviceCIDR holds the Services' cluster IPs. No kube-proxy runs:
	// nothing routes them; the API server's service proxy reaches pods by
	// their own addresses.
	serviceCIDR = "10.217.128.0/24"
	// PauseImage is the pod sandbox image, imported before the kubelet
	// starts.
	PauseImage = "layerprobe.test/pause:1"
)

// Cluster is a running single-node cluster.
type Cluster struct {
	// Dir holds everything of the cluster.
	Dir string
	// Kubeconfig is a kubeconfig of a cluster admin (system:masters).
	Kubeconfig string
	// Server is the API server's URL.
	Server string
	// Containerd is the node's engine; ContainerdSocket its socket.
	Containerd       *testdaemon.Daemon
	ContainerdSocket string
	// Bin is the directory of the Kubernetes binaries, kubectl among them.
	Bin string

	t     testing.TB
	pki   *pki
	ctr   string
	procs []*proc
}

// Release is the Kubernetes release tools/kube/go.mod pins.
func Release(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "tools", "kube", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" && strings.HasPrefix(f[1], "v") {
			return f[1]
		}
	}
	t.Fatal("tools/kube/go.mod requires no k8s.io/kubernetes release")
	return ""
}

// Binaries returns the directory of the Kubernetes binaries, building them
// first when the cache lacks them (scripts/build-kube.sh; `make deps-test`
// builds them ahead, and a cold build takes long).
func Binaries(t testing.TB) string {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(), "scripts", "build-kube.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build-kube.sh: %v\n%s", err, testharness.Tail(stderr.String(), 30))
	}
	if stderr.Len() > 0 {
		t.Logf("scripts/build-kube.sh (%s):\n%s", time.Since(start).Round(time.Second), strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out))
}

// Require skips the test (or fails it when CI is set) unless this machine
// can run the cluster: root, containerd, runc, ctr and the CNI bridge
// plugin.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testharness.SkipOrFail(t, "testkube: needs root")
	}
	for _, p := range []string{cniBin + "/bridge", cniBin + "/host-local", cniBin + "/loopback"} {
		if _, err := os.Stat(p); err != nil {
			testharness.SkipOrFail(t, "testkube: %v (scripts/install-deps.sh installs containernetworking-plugins)", err)
		}
	}
	for _, b := range []string{"containerd", "runc", "ctr", "ip"} {
		if _, err := testdaemon.LookPath(b); err != nil {
			testharness.SkipOrFail(t, "testkube: %v (scripts/install-deps.sh installs it)", err)
		}
	}
}

// cniBin is where Debian's containernetworking-plugins puts the plugins.
const cniBin = "/usr/lib/cni"

// Start starts the cluster and waits until its node is Ready. Cleanup is
// registered with t.Cleanup.
func Start(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	bin := Binaries(t)
	start := time.Now()
	c := newCluster(t)
	c.Bin = bin
	c.startNode()
	c.startControlPlane()
	c.startKubelet()
	c.waitNodeReady(3 * time.Minute)
	t.Logf("testkube: Kubernetes %s with node %s ready in %s", Release(t), NodeName, time.Since(start).Round(time.Second))
	return c
}

// newCluster makes the cluster's directory and its certificates.
func newCluster(t testing.TB) *Cluster {
	t.Helper()
	// One cluster at a time on the machine: the bridge, its subnet and the
	// kernel settings are the machine's. A second test process (make test
	// runs packages side by side) waits for the first one's cluster to go.
	lock, err := os.OpenFile("/run/lock/layerprobe-testkube.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("testkube: %v", err)
	}
	waited := time.Now()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("testkube: lock %s: %v", lock.Name(), err)
	}
	if d := time.Since(waited); d > time.Second {
		t.Logf("testkube: waited %s for another test's cluster", d.Round(time.Second))
	}
	t.Cleanup(func() { lock.Close() }) // closing unlocks; it runs last
	// Short: the sockets below it must fit sun_path.
	dir, err := os.MkdirTemp("/tmp", "lpk")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, t: t}
	t.Cleanup(c.removeDir)
	if c.ctr, err = testdaemon.LookPath("ctr"); err != nil {
		t.Fatal(err)
	}
	c.pki, err = newPKI(dir, []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(BridgeAddress), net.IPv4(10, 217, 128, 1)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		t.Fatalf("testkube: %v", err)
	}
	return c
}

// startNode starts the node's engine: the pods' bridge and CNI
// configuration, containerd with its CRI plugin, and the pause image in it.
func (c *Cluster) startNode() {
	t := c.t
	t.Helper()
	dir := c.Dir
	pauseTar := c.buildPause()
	c.setupBridge()
	c.restoreKernelTunables()

	cniConf := filepath.Join(dir, "cni", "net.d")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		t.Fatal(err)
	}
	// The bridge exists with its address (setupBridge): the plugin only
	// plugs the pods in. No gateway on the plugin's side, so it enables no
	// IP forwarding on the host; the pods need no route beyond their
	// subnet, which the node reaches them on.
	conflist := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "layerprobe-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "rangeStart": "10.217.0.10"}]],
        "dataDir": %q
      }
    }
  ]
}
`, Bridge, PodSubnet, filepath.Join(dir, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(cniConf, "10-layerprobe-test.conflist"), []byte(conflist), 0o644); err != nil {
		t.Fatal(err)
	}
	// The CRI plugin with the node's settings: runc with cgroupfs (the
	// kubelet's cgroupDriver), the overlayfs snapshotter, the local pause
	// image, the cluster's CNI files, and the pods' network namespaces
	// under containerd's state directory instead of /run/netns.
	// restrict_oom_score_adj: the CRI plugin gives every pod sandbox an
	// oom_score_adj of -998, which needs CAP_SYS_RESOURCE; a machine whose
	// root lacks it (as some CI sandboxes do) fails every sandbox in runc
	// ("can't get final child's PID from pipe: EOF", nsexec: "failed to
	// update /proc/self/oom_score_adj: Permission denied"). Restricted, the
	// score is clamped to containerd's own, as for rootless containerd.
	cri := fmt.Sprintf(`  sandbox_image = %q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, PauseImage, cniBin, cniConf)
	c.Containerd = testdaemon.StartContainerd(t, testdaemon.Options{Driver: "overlayfs", CRI: cri})
	c.ContainerdSocket = strings.TrimPrefix(c.Containerd.Host, "unix://")
	c.ImportImage(pauseTar)

}

// buildPause builds the pause binary and writes its image for import.
func (c *Cluster) buildPause() string {
	c.t.Helper()
	bin := filepath.Join(c.Dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./internal/testsupport/testkube/pause")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("testkube: build pause: %v\n%s", err, out)
	}
	tarball := filepath.Join(c.Dir, "pause.oci.tar")
	if err := writeBinaryImage(tarball, PauseImage, bin, "pause"); err != nil {
		c.t.Fatalf("testkube: pause image: %v", err)
	}
	return tarball
}

// setupBridge makes the pods' bridge with its address (one left by a
// killed run is replaced), and removes it with the cluster.
func (c *Cluster) setupBridge() {
	c.t.Helper()
	_, _ = run("ip", "link", "del", Bridge)
	for _, args := range [][]string{
		{"link", "add", Bridge, "type", "bridge"},
		{"addr", "add", bridgeCIDR, "dev", Bridge},
		{"link", "set", Bridge, "up"},
	} {
		if out, err := run("ip", args...); err != nil {
			c.t.Fatalf("testkube: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	c.t.Cleanup(func() {
		if out, err := run("ip", "link", "del", Bridge); err != nil {
			c.t.Errorf("testkube: ip link del %s: %v: %s", Bridge, err, out)
		}
	})
}

// kernelTunables are the settings the kubelet sets on start
// (protectKernelDefaults false; true only makes it refuse to start where
// they differ). They are the machine's, so the cluster puts them back.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func (c *Cluster) restoreKernelTunables() {
	saved := map[string][]byte{}
	for _, k := range kernelTunables {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			saved[k] = b
		}
	}
	c.t.Cleanup(func() {
		for k, v := range saved {
			if err := os.WriteFile("/proc/sys/"+k, v, 0o644); err != nil {
				c.t.Errorf("testkube: restore %s: %v", k, err)
			}
		}
	})
}

// ImportImage imports an image tarball (OCI layout or `docker save`) into
// the node's containerd, in the kubelet's namespace, every platform.
func (c *Cluster) ImportImage(tarball string) {
	c.t.Helper()
	if out, err := c.Ctr(5*time.Minute, "k8s.io", "images", "import", "--all-platforms", tarball); err != nil {
		c.t.Fatalf("testkube: ctr images import %s: %v\n%s", tarball, err, out)
	}
}

// Ctr runs ctr against the node's containerd in namespace ns.
func (c *Cluster) Ctr(timeout time.Duration, ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.ctr, append([]string{"-a", c.ContainerdSocket, "-n", ns}, args...)...).CombinedOutput()
	return string(out), err
}

// Kubectl runs kubectl as the cluster admin and returns its standard
// output; a failure is returned with its standard error.
func (c *Cluster) Kubectl(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// MustKubectl is Kubectl that fails the test on an error.
func (c *Cluster) MustKubectl(args ...string) string {
	c.t.Helper()
	out, err := c.Kubectl(2*time.Minute, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// AdminCredentials returns the files of the cluster's CA certificate and
// of a cluster admin's client certificate and key.
func (c *Cluster) AdminCredentials() (ca, cert, key string) {
	return c.pki.CA, c.pki.AdminCert, c.pki.AdminKey
}

// Logs returns the end of a component's log (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet).
func (c *Cluster) Logs(name string, lines int) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "log", name+".log"))
	return testharness.Tail(string(b), lines)
}

func (c *Cluster) startControlPlane() {
	t := c.t
	t.Helper()
	etcdClient, etcdPeer := testharness.MustFreePort(t), testharness.MustFreePort(t)
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	// --unsafe-no-fsync: a test cluster's state is thrown away with it,
	// and fsyncs on a loaded disk only slow every write.
	c.startProc("etcd", "--name", "default", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--unsafe-no-fsync", "--log-level", "warn")
	c.waitHTTP("etcd", clientURL+"/health", nil, time.Minute)

	// A port free on loopback is as free on the bridge's address: the
	// bridge is the cluster's own.
	apiPort := testharness.MustFreePort(t)
	c.Server = fmt.Sprintf("https://%s:%d", BridgeAddress, apiPort)
	p := c.pki
	// No endpoint reconciler: there is no kube-proxy to route the
	// kubernetes Service, and pods are given the API server's address.
	c.startProc("kube-apiserver",
		"--etcd-servers", clientURL,
		"--bind-address", BridgeAddress, "--secure-port", fmt.Sprint(apiPort),
		"--advertise-address", BridgeAddress, "--endpoint-reconciler-type", "none",
		"--tls-cert-file", p.ServerCert, "--tls-private-key-file", p.ServerKey,
		"--client-ca-file", p.CA,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p.SAPub, "--service-account-signing-key-file", p.SAKey,
		"--service-cluster-ip-range", serviceCIDR,
		"--authorization-mode", "Node,RBAC",
		"--allow-privileged=true",
		"--kubelet-client-certificate", p.AdminCert, "--kubelet-client-key", p.AdminKey,
		"--kubelet-preferred-address-types", "Hostname",
		"--profiling=false")
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: layerprobe-test
    cluster:
      server: %s
      certificate-authority: %s
users:
  - name: admin
    user:
      client-certificate: %s
      client-key: %s
contexts:
  - name: layerprobe-test
    context: {cluster: layerprobe-test, user: admin}
current-context: layerprobe-test
`, c.Server, p.CA, p.AdminCert, p.AdminKey)
	if err := os.WriteFile(c.Kubeconfig, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// Its first start on a loaded machine (a cold page cache for a
	// 100 MB binary, the bootstrap objects) took over 3 minutes once, 60 s
	// when run again.
	c.waitHTTP("kube-apiserver", c.Server+"/readyz", c.adminTLS(), 8*time.Minute)

	common := []string{"--kubeconfig", c.Kubeconfig,
		"--authentication-kubeconfig", c.Kubeconfig, "--authorization-kubeconfig", c.Kubeconfig,
		"--bind-address", "127.0.0.1", "--leader-elect=false", "--profiling=false"}
	c.startProc("kube-controller-manager", append(common,
		"--secure-port", fmt.Sprint(testharness.MustFreePort(t)),
		"--service-account-private-key-file", p.SAKey, "--root-ca-file", p.CA,
		"--service-cluster-ip-range", serviceCIDR)...)
	c.startProc("kube-scheduler", append(common,
		"--secure-port", fmt.Sprint(testharness.MustFreePort(t)))...)
}

func (c *Cluster) startKubelet() {
	t := c.t
	t.Helper()
	root := filepath.Join(c.Dir, "kubelet")
	// The kubelet's mounts (pod volumes) go with the cluster; registered
	// before the kubelet's own stop, so it runs after it.
	t.Cleanup(func() {
		if err := unmountUnder(root); err != nil {
			t.Errorf("testkube: %v", err)
		}
	})
	// cgroupfs, as containerd's runc (SystemdCgroup false); no QoS
	// cgroups of the kubelet's own in the machine's hierarchy (the pods'
	// containers get theirs from containerd); failCgroupV1 false for a
	// cgroup v1 machine (1.35 and later refuse one otherwise; 1.34's
	// default). No eviction and no image garbage collection: the images
	// cannot be pulled again, and the machine's free disk is not the
	// test's business.
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
podLogsDir: %s
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 10s
serializeImagePulls: false
registerNode: true
`, testharness.MustFreePort(t), c.pki.CA, c.ContainerdSocket, filepath.Join(c.Dir, "pod-logs"))
	cfgFile := filepath.Join(c.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	c.startProc("kubelet", "--config", cfgFile, "--kubeconfig", c.Kubeconfig,
		"--root-dir", root, "--cert-dir", filepath.Join(c.Dir, "kubelet-pki"),
		"--hostname-override", NodeName, "--v", "1")
}

func (c *Cluster) waitNodeReady(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		out, err := c.Kubectl(30*time.Second, "get", "node", NodeName, "-o", `jsonpath={range .status.conditions[?(@.type=="Ready")]}{.status} {.message}{end}`)
		if err == nil && strings.HasPrefix(out, "True") {
			return
		}
		last = out
		if err != nil {
			last = err.Error()
		}
		c.checkProcs()
		time.Sleep(time.Second)
	}
	c.t.Fatalf("testkube: node %s not Ready within %s: %s\nkubelet log:\n%s", NodeName, timeout, last, c.Logs("kubelet", 60))
}

func (c *Cluster) adminTLS() *tls.Config {
	c.t.Helper()
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(c.pki.CA)
	if err != nil {
		c.t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(c.pki.AdminCert, c.pki.AdminKey)
	if err != nil {
		c.t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

func (c *Cluster) waitHTTP(name, url string, tlsConfig *tls.Config, timeout time.Duration) {
	c.t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		c.checkProcs()
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("testkube: %s not ready at %s within %s: %s\n%s", name, url, timeout, last, c.Logs(name, 40))
}

// proc is a running component.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// startProc starts a component from the Kubernetes binaries.
func (c *Cluster) startProc(name string, args ...string) {
	c.t.Helper()
	c.StartProcess(name, filepath.Join(c.Bin, name), args...)
}

// StartProcess runs the program at path beside the cluster's components
// (a test's operator, say), as they run: its log in Dir/log/<name>.log
// (Logs), stopped (SIGTERM, then SIGKILL) at cleanup in the reverse order
// of starting, and its exit fails the test at the next CheckProcesses.
func (c *Cluster) StartProcess(name, path string, args ...string) {
	c.t.Helper()
	logDir := filepath.Join(c.Dir, "log")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.Dir
	cmd.Env = componentEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("testkube: start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	c.procs = append(c.procs, p)
	c.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if c.t.Failed() {
			c.t.Logf("testkube: %s log:\n%s", name, c.Logs(name, 30))
		}
	})
}

// CheckProcesses fails the test when a component, or a process
// StartProcess started, has exited.
func (c *Cluster) CheckProcesses() { c.t.Helper(); c.checkProcs() }

// checkProcs fails the test when a component has exited.
func (c *Cluster) checkProcs() {
	c.t.Helper()
	for _, p := range c.procs {
		select {
		case <-p.exited:
			c.t.Fatalf("testkube: %s exited: %v\n%s", p.name, p.err, c.Logs(p.name, 40))
		default:
		}
	}
}

// componentEnv is the test's environment without what would point a
// component elsewhere than the cluster's own files.
func componentEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "CONTAINERD_ADDRESS", "CONTAINERD_NAMESPACE", "ETCDCTL_API", "NOTIFY_SOCKET":
			continue
		case "PATH":
			kv += ":/usr/local/sbin:/usr/sbin:/sbin"
		}
		env = append(env, kv)
	}
	return env
}

func (c *Cluster) removeDir() {
	if err := unmountUnder(c.Dir); err != nil {
		c.t.Errorf("testkube: %v", err)
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		c.t.Errorf("testkube: remove %s: %v", c.Dir, err)
	}
}

// unmountUnder lazily unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	for range 10 {
		mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for i := len(mounts) - 1; i >= 0; i-- {
			if err := syscall.Unmount(mounts[i].Mountpoint, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("unmount %s: %w", mounts[i].Mountpoint, err)
			}
		}
	}
	return fmt.Errorf("mounts left under %s", dir)
}

var repoRootOnce = sync.OnceValue(func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
})

// repoRoot is the repository's top directory.
func repoRoot() string { return repoRootOnce() }

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
