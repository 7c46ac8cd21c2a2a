package asshipped

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Pod is the part of a DaemonSet's pod template the reproduction reads,
// with every other key kept so that RunFlags can refuse what it does not
// know.
type Pod struct {
	HostPID    bool           `yaml:"hostPID"`
	Containers []Container    `yaml:"containers"`
	Volumes    []Volume       `yaml:"volumes"`
	Rest       map[string]any `yaml:",inline"`
}

// Container is a container of a Pod.
type Container struct {
	Name            string           `yaml:"name"`
	Image           string           `yaml:"image"`
	Args            []string         `yaml:"args"`
	Env             []map[string]any `yaml:"env"`
	VolumeMounts    []VolumeMount    `yaml:"volumeMounts"`
	SecurityContext map[string]any   `yaml:"securityContext"`
	Resources       struct {
		Limits   map[string]string `yaml:"limits"`
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
	Rest map[string]any `yaml:",inline"`
}

// VolumeMount is a container's volumeMounts entry.
type VolumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	ReadOnly  bool   `yaml:"readOnly"`
}

// Volume is a pod's volumes entry, of the kinds the manifests use.
type Volume struct {
	Name     string `yaml:"name"`
	HostPath *struct {
		Path string `yaml:"path"`
		Type string `yaml:"type"`
	} `yaml:"hostPath"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	EmptyDir *struct{} `yaml:"emptyDir"`
}

// DaemonSetPod reads the pod template of the DaemonSet in file.
func DaemonSetPod(t testing.TB, file string) Pod {
	t.Helper()
	var doc struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Template struct {
				Spec Pod `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &doc); err != nil || doc.Kind != "DaemonSet" {
		t.Fatalf("%s: kind %q, %v", file, doc.Kind, err)
	}
	return doc.Spec.Template.Spec
}

// The pod and container keys the reproduction leaves out, and why. Any
// other key of the manifest fails RunFlags: a new setting must be
// reproduced here, or listed with its reason.
var (
	podIgnored = map[string]string{
		"nodeSelector":                  "placement",
		"tolerations":                   "placement",
		"automountServiceAccountToken":  "no API token is mounted either way",
		"terminationGracePeriodSeconds": "`docker stop -t 60` in the test",
	}
	containerIgnored = map[string]string{
		"imagePullPolicy": "nothing is pulled here",
		"ports":           "the host network: the port is the configured listen address",
		"readinessProbe":  "kubelet's, not the agent's",
		"livenessProbe":   "kubelet's, not the agent's",
	}
)

// The cgroup namespaces of `docker run --cgroupns`: a kubelet's runtime
// gives a pod's container the node's on a cgroup v1 node, and one of its
// own on a cgroup v2 node (containerd's CRI and CRI-O create one there,
// and no pod field asks for the node's). Docker accepts a private one on
// cgroup v1 too, where the agent must join the same way.
const (
	CgroupNSNode    = "host"
	CgroupNSPrivate = "private"
)

// RunFlags translates a DaemonSet's pod into `docker run` flags as a
// kubelet would have its runtime start the container, in the cgroup
// namespace cgroupNS (CgroupNSNode or CgroupNSPrivate), and returns the
// container's image and arguments apart, for the caller to put last or
// replace. hostPath volumes are the node's paths, which in a test's host
// are its own, or the host's path nodePaths gives for one (a node without
// it); a ConfigMap is the directory configMaps names; an emptyDir a fresh
// directory.
func RunFlags(t testing.TB, pod Pod, configMaps, nodePaths map[string]string, cgroupNS string) (flags []string, image string, args []string) {
	t.Helper()
	for k := range pod.Rest {
		if _, ok := podIgnored[k]; !ok {
			t.Fatalf("the DaemonSet's pod sets %s, which this reproduction does not know: reproduce it in asshipped.RunFlags", k)
		}
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	for k := range c.Rest {
		if _, ok := containerIgnored[k]; !ok {
			t.Fatalf("the DaemonSet's container sets %s, which this reproduction does not know: reproduce it in asshipped.RunFlags", k)
		}
	}
	flags = []string{"--cgroupns", cgroupNS}
	if pod.HostPID {
		flags = append(flags, "--pid", "host")
	}
	if len(c.Env) > 0 {
		t.Fatalf("the container sets env %v: reproduce it in asshipped.RunFlags", c.Env)
	}
	sc := c.SecurityContext
	for k, v := range sc {
		switch k {
		case "runAsUser", "runAsGroup", "runAsNonRoot":
		case "allowPrivilegeEscalation":
			if v == false {
				flags = append(flags, "--security-opt", "no-new-privileges")
			}
		case "readOnlyRootFilesystem":
			if v == true {
				flags = append(flags, "--read-only")
			}
		case "privileged":
			if v == true {
				flags = append(flags, "--privileged")
			}
		case "capabilities":
			caps, _ := v.(map[string]any)
			// Kubernetes drops, then adds: drop ALL with an add keeps the
			// added ones, and so does docker run.
			for _, kind := range []string{"drop", "add"} {
				items, _ := caps[kind].([]any)
				for _, it := range items {
					flags = append(flags, "--cap-"+kind, fmt.Sprint(it))
				}
			}
			for kind := range caps {
				if kind != "drop" && kind != "add" {
					t.Fatalf("securityContext.capabilities.%s: reproduce it in asshipped.RunFlags", kind)
				}
			}
		case "seccompProfile":
			if p, _ := v.(map[string]any); p["type"] != "RuntimeDefault" {
				t.Fatalf("seccompProfile %v: only RuntimeDefault (Docker's default profile) is reproduced", v)
			}
		default:
			t.Fatalf("securityContext.%s: reproduce it in asshipped.RunFlags", k)
		}
	}
	if sc["runAsNonRoot"] == true {
		t.Fatal("runAsNonRoot: the image runs as root")
	}
	flags = append(flags, "--user", fmt.Sprintf("%v:%v", cmp.Or(sc["runAsUser"], any(0)), cmp.Or(sc["runAsGroup"], any(0))))
	if m := c.Resources.Limits["memory"]; m != "" {
		flags = append(flags, "--memory", strings.TrimSuffix(strings.ToLower(m), "i"))
	}
	if cpu := c.Resources.Limits["cpu"]; cpu != "" {
		t.Fatalf("a CPU limit (%s): reproduce it in asshipped.RunFlags", cpu)
	}
	if cpu := c.Resources.Requests["cpu"]; cpu != "" {
		// kubelet: cpu.shares = milli-CPUs × 1024 / 1000.
		milli, err := strconv.Atoi(strings.TrimSuffix(cpu, "m"))
		if err != nil || !strings.HasSuffix(cpu, "m") {
			t.Fatalf("CPU request %q: want milli-CPUs", cpu)
		}
		flags = append(flags, "--cpu-shares", strconv.Itoa(max(2, milli*1024/1000)))
	}
	volumes := map[string]Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("volumeMount %s names no volume", m.Name)
		}
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		switch {
		case v.HostPath != nil:
			// -v makes a missing source directory, as DirectoryOrCreate.
			src := cmp.Or(nodePaths[v.HostPath.Path], v.HostPath.Path)
			flags = append(flags, "-v", src+":"+m.MountPath+":"+mode)
		case v.ConfigMap != nil:
			dir, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("ConfigMap %s: no directory given for it", v.ConfigMap.Name)
			}
			flags = append(flags, "-v", dir+":"+m.MountPath+":ro")
		case v.EmptyDir != nil:
			flags = append(flags, "--tmpfs", m.MountPath)
		default:
			t.Fatalf("volume %s: a kind asshipped.RunFlags does not reproduce", v.Name)
		}
	}
	return flags, c.Image, c.Args
}
