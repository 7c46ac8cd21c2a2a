package ops

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/config"
)

// containerdManifests are the containerd variant of the DaemonSet; the
// Docker variant (20-daemonset.yaml) stays for nodes that run Docker.
const (
	containerdDaemonSet = "deploy/kubernetes/21-daemonset-containerd.yaml"
	containerdConfigMap = "deploy/kubernetes/11-configmap-containerd.yaml"
)

// k8sPod is what these checks read of a DaemonSet beyond k8sObject.
type k8sPod struct {
	Spec struct {
		Template struct {
			Spec struct {
				NodeSelector map[string]string `yaml:"nodeSelector"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func decodeManifest(t *testing.T, file string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(readFile(t, repoPath(file))), v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestKubernetesContainerdVariant: the containerd DaemonSet sees
// containerd's socket, its FIFO directory and the snapshotter's root at the
// node's paths, keeps the scratch directory on the snapshotter root's file
// system, runs on other nodes than the Docker variant, and its ConfigMap is
// a valid configuration of a containerd engine.
func TestKubernetesContainerdVariant(t *testing.T) {
	var ds, docker, cm k8sObject
	var pod, dockerPod k8sPod
	decodeManifest(t, containerdDaemonSet, &ds)
	decodeManifest(t, containerdDaemonSet, &pod)
	decodeManifest(t, "deploy/kubernetes/20-daemonset.yaml", &docker)
	decodeManifest(t, "deploy/kubernetes/20-daemonset.yaml", &dockerPod)
	decodeManifest(t, containerdConfigMap, &cm)

	if ds.Kind != "DaemonSet" || ds.Metadata.Name == docker.Metadata.Name || ds.Metadata.Namespace != docker.Metadata.Namespace {
		t.Fatalf("want a second DaemonSet in namespace %s; have %s/%s in %s", docker.Metadata.Namespace, ds.Kind, ds.Metadata.Name, ds.Metadata.Namespace)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod labels %v", k, v, ds.Spec.Template.Metadata.Labels)
		}
	}
	// Two DaemonSets whose selectors each match the other's pods are what
	// Kubernetes warns against: each controller counts the other's pods
	// as its own in its status and rollout. Each selector must miss the
	// other variant's pod labels.
	if selects(docker.Spec.Selector.MatchLabels, ds.Spec.Template.Metadata.Labels) {
		t.Errorf("the Docker DaemonSet's selector %v matches the containerd pods' labels %v", docker.Spec.Selector.MatchLabels, ds.Spec.Template.Metadata.Labels)
	}
	if selects(ds.Spec.Selector.MatchLabels, docker.Spec.Template.Metadata.Labels) {
		t.Errorf("the containerd DaemonSet's selector %v matches the Docker pods' labels %v", ds.Spec.Selector.MatchLabels, docker.Spec.Template.Metadata.Labels)
	}
	// The shipped scrape job finds the pods by this label.
	if ds.Spec.Template.Metadata.Labels["app.kubernetes.io/name"] != "layerprobe" {
		t.Errorf("pod labels %v lack app.kubernetes.io/name=layerprobe, which the scrape config selects", ds.Spec.Template.Metadata.Labels)
	}
	ns, dns := pod.Spec.Template.Spec.NodeSelector, dockerPod.Spec.Template.Spec.NodeSelector
	if len(ns) == 0 || len(dns) == 0 {
		t.Errorf("node selectors: containerd %v, docker %v; want each variant on labelled nodes", ns, dns)
	}
	for k := range ns {
		if _, ok := dns[k]; ok {
			t.Errorf("both variants select nodes by %s", k)
		}
	}

	checkContainerdAgent(t, "deploy/kubernetes", ds, cm)
}

// checkContainerdAgent checks a containerd agent's DaemonSet against its
// ConfigMap, wherever they come from (the manifests, the Helm chart): the
// pod runs as uid 0 with CAP_SYS_ADMIN only, its configuration is a valid one
// of a containerd engine without volumes, and the pod sees the engine's
// socket, its FIFO directory, the snapshotter root and the scratch
// directory at the node's paths, writable where the agent writes.
func checkContainerdAgent(t *testing.T, from string, ds, cm k8sObject) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || len(spec.Containers) != 1 {
		t.Fatalf("pod spec: hostPID %v, %d containers", spec.HostPID, len(spec.Containers))
	}
	c := spec.Containers[0]
	checkPodSecurityContext(t, c.SecurityContext)
	mounts := map[string]bool{} // path -> read-only
	for path, m := range podMounts(t, spec.Volumes, c.VolumeMounts) {
		mounts[path] = m.ReadOnly
		if v := m.Volume; v.ConfigMap != nil && v.ConfigMap.Name != cm.Metadata.Name {
			t.Errorf("volume %s names ConfigMap %s, want %s", v.Name, v.ConfigMap.Name, cm.Metadata.Name)
		}
	}

	// The configuration: a containerd engine whose socket and snapshotter
	// root the pod sees.
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, time.Minute, "", nil, agentBinary(t), "config", "check", cfgFile); r.err != nil {
		t.Fatalf("layerprobe config check of %s's containerd ConfigMap:\n%s", from, r)
	}
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Engines) != 1 || !cfg.Engines[0].IsContainerd() {
		t.Fatalf("engines %+v: want one of type containerd", cfg.Engines)
	}
	if slices.Contains(cfg.Targets, "volume") {
		t.Errorf("targets %v: containerd has no named volumes", cfg.Targets)
	}
	e := cfg.Engines[0]
	sock := strings.TrimPrefix(e.Host, "unix://")
	if sock == "" {
		sock = "/run/containerd/containerd.sock"
	}
	// A node without containerd's socket starts the pod, whose agent says
	// so: no hostPath check that would keep it in ContainerCreating.
	for _, v := range spec.Volumes {
		if h := v.HostPath; h != nil && (h.Type == "Socket" || h.Type == "File" || h.Path == path.Dir(sock) && h.Type != "DirectoryOrCreate") {
			t.Errorf("hostPath %s of type %s: a node without it keeps the pod from starting", h.Path, h.Type)
		}
	}
	snapshotter := e.Snapshotter
	if snapshotter == "" {
		snapshotter = "overlayfs"
	}
	root := "/var/lib/containerd/io.containerd.snapshotter.v1." + snapshotter
	scratch := e.ScratchDir
	if scratch == "" {
		scratch = root + "/layerprobe-scratch"
	}
	want := map[string]bool{
		// The socket, and the FIFOs of exec output that containerd's
		// shims open by path.
		path.Dir(sock):         false,
		"/run/containerd/fifo": false,
		"/var/lib/containerd":  true,
		scratch:                false,
		"/var/lib/layerprobe":  false,
		"/run/lock":            false,
		"/etc/layerprobe":      true,
		"/tmp":                 false,
	}
	for p, ro := range want {
		// The deepest mount at or above p decides.
		best := ""
		for m := range mounts {
			if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(best) {
				best = m
			}
		}
		switch {
		case best == "":
			t.Errorf("nothing mounted at or above %s (mounts %v)", p, mounts)
		case mounts[best] && !ro:
			t.Errorf("%s is read-only in the pod (mount %s); the agent writes there", p, best)
		}
	}
	if ro, ok := mounts[scratch]; !ok || ro {
		t.Errorf("the scratch directory %s is not mounted writable on its own (mounts %v)", scratch, mounts)
	}
	if ro, ok := mounts["/var/lib/containerd"]; !ok || !ro {
		t.Errorf("containerd's root must be mounted read-only (mounts %v)", mounts)
	}
}
