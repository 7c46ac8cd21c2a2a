package ops

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/layerprobe/layerprobe/internal/testsupport/asshipped"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

const composeFile = "deploy/compose/docker-compose.yml"

// composeService is the part of a compose service these tests read, as
// `docker compose config` (Compose v2) prints it.
type composeService struct {
	Image       string            `yaml:"image"`
	User        string            `yaml:"user"`
	CapDrop     []string          `yaml:"cap_drop"`
	CapAdd      []string          `yaml:"cap_add"`
	SecurityOpt []string          `yaml:"security_opt"`
	ReadOnly    bool              `yaml:"read_only"`
	Tmpfs       []string          `yaml:"tmpfs"`
	Pid         string            `yaml:"pid"`
	Cgroup      string            `yaml:"cgroup"`
	Privileged  bool              `yaml:"privileged"`
	Volumes     []composeVolume   `yaml:"volumes"`
	Ports       []composePort     `yaml:"ports"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Build       *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
}

// composeVolume is a mount of a service in the long syntax Compose v2's
// config prints.
type composeVolume struct {
	Type     string `yaml:"type"` // bind, volume
	Source   string `yaml:"source"`
	Target   string `yaml:"target"`
	ReadOnly bool   `yaml:"read_only"`
}

// String is the mount in the short syntax, source:target:mode.
func (v composeVolume) String() string {
	mode := "rw"
	if v.ReadOnly {
		mode = "ro"
	}
	return v.Source + ":" + v.Target + ":" + mode
}

// composePort is a published port in the long syntax.
type composePort struct {
	HostIP    string `yaml:"host_ip"`
	Published string `yaml:"published"`
	Target    int    `yaml:"target"`
}

// volumes are the service's mounts in the short syntax.
func (s composeService) volumes() []string {
	var out []string
	for _, v := range s.Volumes {
		out = append(out, v.String())
	}
	return out
}

type composeDoc struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

// composeConfig runs `docker compose config`: Docker Compose's own parser
// and schema validation (services, keys and value types; unknown keys are
// errors), with the variables interpolated and the paths made absolute. It
// returns the normalized file.
func composeConfig(t testing.TB, env ...string) composeDoc {
	t.Helper()
	dc := composeV2(t)
	r := run(t, time.Minute, repoPath("deploy/compose"), append([]string{"DOCKER_DATA_ROOT=", "LAYERPROBE_BASE_IMAGE=", "LAYERPROBE_PORT="}, env...),
		dc[0], append(dc[1:], "--file", "docker-compose.yml", "config")...)
	if r.err != nil {
		t.Fatalf("docker compose config:\n%s", r)
	}
	var d composeDoc
	if err := yaml.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("decode docker compose config output: %v\n%s", err, r.stdout)
	}
	return d
}

// TestComposeFile validates the compose file with Docker Compose itself and
// checks that it is the whole stack: the agent built from the repository's
// Dockerfile with its socket, data root and hardening; Prometheus with the
// shipped rules; Alertmanager; Grafana with the dashboards provisioned; and
// that every file it mounts exists.
func TestComposeFile(t *testing.T) {
	d := composeConfig(t)
	for _, s := range []string{"layerprobe", "prometheus", "alertmanager", "grafana"} {
		if _, ok := d.Services[s]; !ok {
			t.Fatalf("service %s missing; have %v", s, d.Services)
		}
	}
	for name, s := range d.Services {
		for _, v := range s.Volumes {
			src := v.Source
			if strings.HasPrefix(src, repoRoot+"/") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
		for _, p := range s.Ports {
			if p.HostIP != "127.0.0.1" {
				t.Errorf("service %s publishes %+v on every address; want 127.0.0.1", name, p)
			}
		}
	}
	lp := d.Services["layerprobe"]
	if lp.Build == nil || filepath.Join(lp.Build.Context, lp.Build.Dockerfile) != repoPath("deploy/docker/Dockerfile") {
		t.Errorf("layerprobe build %+v: want the repository with deploy/docker/Dockerfile", lp.Build)
	}
	checkAgentHardening(t, lp)
	for _, want := range []string{
		"/var/run/docker.sock:/var/run/docker.sock:rw",
		"/var/lib/docker:/var/lib/docker:ro",
		"/var/lib/docker/layerprobe-scratch:/var/lib/docker/layerprobe-scratch:rw",
		"/run/lock:/run/lock:rw",
		"layerprobe-state:/var/lib/layerprobe:rw",
		// The host arm joins the probe container's CPU cgroups.
		"/sys/fs/cgroup:/sys/fs/cgroup:rw",
		repoPath("deploy/compose/layerprobe/config.yaml") + ":/etc/layerprobe/config.yaml:ro",
	} {
		if !slices.Contains(lp.volumes(), want) {
			t.Errorf("layerprobe volumes %v lack %s", lp.volumes(), want)
		}
	}
	// DOCKER_DATA_ROOT moves the data root and the scratch directory together.
	moved := composeConfig(t, "DOCKER_DATA_ROOT=/srv/docker").Services["layerprobe"].volumes()
	for _, want := range []string{"/srv/docker:/srv/docker:ro", "/srv/docker/layerprobe-scratch:/srv/docker/layerprobe-scratch:rw"} {
		if !slices.Contains(moved, want) {
			t.Errorf("with DOCKER_DATA_ROOT=/srv/docker the volumes %v lack %s", moved, want)
		}
	}
	if p := d.Services["prometheus"]; !slices.Contains(p.volumes(), repoPath(rulesFile)+":/etc/prometheus/rules/layerprobe-rules.yml:ro") {
		t.Errorf("prometheus does not mount the shipped rules: %v", p.volumes())
	}
	if g := d.Services["grafana"]; !slices.Contains(g.volumes(), repoPath("dashboards")+":/var/lib/grafana/dashboards/layerprobe:ro") ||
		!slices.Contains(g.volumes(), repoPath("deploy/compose/grafana/provisioning")+":/etc/grafana/provisioning:ro") {
		t.Errorf("grafana does not mount the dashboards and the provisioning: %v", g.volumes())
	}

	// The stack's Prometheus reads the rules where compose mounts them and
	// scrapes the agent service; Grafana's provider reads the dashboards
	// where compose mounts them.
	prom := readYAML[struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			HonorLabels   bool   `yaml:"honor_labels"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
		Alerting struct {
			Alertmanagers []struct {
				StaticConfigs []struct {
					Targets []string `yaml:"targets"`
				} `yaml:"static_configs"`
			} `yaml:"alertmanagers"`
		} `yaml:"alerting"`
	}](t, "deploy/compose/prometheus/prometheus.yml")
	if !slices.Equal(prom.RuleFiles, []string{"/etc/prometheus/rules/layerprobe-rules.yml"}) {
		t.Errorf("compose prometheus.yml rule_files %v", prom.RuleFiles)
	}
	scrapesAgent := false
	for _, sc := range prom.ScrapeConfigs {
		if sc.JobName == "layerprobe" && len(sc.StaticConfigs) == 1 && slices.Equal(sc.StaticConfigs[0].Targets, []string{"layerprobe:9811"}) {
			scrapesAgent = true
		}
	}
	if !scrapesAgent {
		t.Error("compose prometheus.yml does not scrape layerprobe:9811 as job layerprobe")
	}
	if am := prom.Alerting.Alertmanagers; len(am) != 1 || !slices.Equal(am[0].StaticConfigs[0].Targets, []string{"alertmanager:9093"}) {
		t.Errorf("compose prometheus.yml alerting: %+v", am)
	}
	prov := readYAML[struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}](t, "deploy/compose/grafana/provisioning/dashboards/layerprobe.yml")
	if len(prov.Providers) != 1 || prov.Providers[0].Type != "file" || prov.Providers[0].Options.Path != "/var/lib/grafana/dashboards/layerprobe" {
		t.Errorf("grafana dashboard provider: %+v", prov)
	}
	ds := readYAML[struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Type      string `yaml:"type"`
			URL       string `yaml:"url"`
			IsDefault bool   `yaml:"isDefault"`
		} `yaml:"datasources"`
	}](t, "deploy/compose/grafana/provisioning/datasources/prometheus.yml")
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" ||
		ds.Datasources[0].URL != "http://prometheus:9090" || !ds.Datasources[0].IsDefault {
		t.Errorf("grafana datasource provisioning: %+v", ds)
	}
	if home := d.Services["grafana"].Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "/var/lib/grafana/dashboards/layerprobe/layerprobe-fleet.json" {
		t.Errorf("grafana home dashboard %q", home)
	}
}

// checkAgentHardening: the agent's container keeps uid 0 but no capability,
// cannot gain privileges, has a read-only root file system, the host's
// pid namespace (owner tokens) and the host's cgroup namespace (the host
// arm's join on cgroup v2, without CAP_SYS_ADMIN), and is not privileged.
func checkAgentHardening(t *testing.T, s composeService) {
	t.Helper()
	if s.User != "0:0" || !slices.Equal(s.CapDrop, []string{"ALL"}) || len(s.CapAdd) > 0 || s.Privileged ||
		!slices.Contains(s.SecurityOpt, "no-new-privileges:true") || !s.ReadOnly || s.Pid != "host" || s.Cgroup != "host" ||
		!slices.Equal(s.Tmpfs, []string{"/tmp"}) {
		t.Errorf("layerprobe service hardening: user %q cap_drop %v cap_add %v privileged %v security_opt %v read_only %v pid %q cgroup %q tmpfs %v",
			s.User, s.CapDrop, s.CapAdd, s.Privileged, s.SecurityOpt, s.ReadOnly, s.Pid, s.Cgroup, s.Tmpfs)
	}
}

// TestComposeRejectsMistakes makes sure the validator used above rejects
// what it should (an unknown key, a wrong type), so that its passing means
// something.
func TestComposeRejectsMistakes(t *testing.T) {
	dc := composeV2(t)
	b, err := os.ReadFile(repoPath(composeFile))
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(string) string{
		"unknown key": func(s string) string {
			return strings.Replace(s, "    read_only: true", "    read_only: true\n    readonly: true", 1)
		},
		"wrong type": func(s string) string { return strings.Replace(s, "    read_only: true", "    read_only: [true]", 1) },
	} {
		dir := t.TempDir()
		bad := mutate(string(b))
		if bad == string(b) {
			t.Fatalf("%s: mutation did not apply", name)
		}
		if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := run(t, time.Minute, dir, nil, dc[0], append(dc[1:], "--file", "docker-compose.yml", "config", "--quiet")...); r.err == nil {
			t.Errorf("docker compose config accepted a compose file with a %s", name)
		}
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readYAML[T any](t testing.TB, path string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(repoPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestAlertmanagerConfig validates the compose stack's Alertmanager
// configuration with amtool, Alertmanager's own parser.
func TestAlertmanagerConfig(t *testing.T) {
	amtool := tool(t, "amtool")
	r := run(t, time.Minute, "", nil, amtool, "check-config", repoPath("deploy/compose/alertmanager/alertmanager.yml"))
	if r.err != nil || !strings.Contains(r.stdout, "SUCCESS") {
		t.Errorf("amtool check-config:\n%s", r)
	}
	// The inhibition names alerts that exist.
	b, _ := os.ReadFile(repoPath("deploy/compose/alertmanager/alertmanager.yml"))
	for _, m := range regexp.MustCompile(`Layerprobe[A-Za-z]+`).FindAllString(string(b), -1) {
		if !slices.Contains(wantAlerts, m) {
			t.Errorf("alertmanager.yml names %s, which is not a shipped alert", m)
		}
	}
}

// TestPrometheusConfigs checks the compose stack's prometheus.yml with
// promtool. The Kubernetes scrape job cannot be: Debian's Prometheus is
// built without Kubernetes service discovery, so its promtool rejects
// kubernetes_sd_configs; it is checked for structure and by yamllint.
func TestPrometheusConfigs(t *testing.T) {
	promtool := tool(t, "promtool")
	r := run(t, time.Minute, "", nil, promtool, "check", "config", "--syntax-only", repoPath("deploy/compose/prometheus/prometheus.yml"))
	if r.err != nil {
		t.Errorf("promtool check config:\n%s", r)
	}
	k := readYAML[struct {
		ScrapeConfigs []struct {
			JobName      string `yaml:"job_name"`
			HonorLabels  bool   `yaml:"honor_labels"`
			KubernetesSD []struct {
				Role string `yaml:"role"`
			} `yaml:"kubernetes_sd_configs"`
			RelabelConfigs []struct {
				SourceLabels []string `yaml:"source_labels"`
				Action       string   `yaml:"action"`
				Regex        string   `yaml:"regex"`
				TargetLabel  string   `yaml:"target_label"`
			} `yaml:"relabel_configs"`
		} `yaml:"scrape_configs"`
	}](t, "deploy/kubernetes/prometheus/scrape-config.yml")
	if len(k.ScrapeConfigs) != 1 {
		t.Fatalf("kubernetes scrape config: %+v", k)
	}
	sc := k.ScrapeConfigs[0]
	if sc.JobName != "layerprobe" || sc.HonorLabels || len(sc.KubernetesSD) != 1 || sc.KubernetesSD[0].Role != "pod" {
		t.Errorf("kubernetes scrape config: %+v", sc)
	}
	keepsPort, setsInstance := false, false
	for _, rc := range sc.RelabelConfigs {
		if rc.Action == "keep" && slices.Equal(rc.SourceLabels, []string{"__meta_kubernetes_pod_container_port_name"}) && rc.Regex == "metrics" {
			keepsPort = true
		}
		if rc.TargetLabel == "instance" && slices.Equal(rc.SourceLabels, []string{"__meta_kubernetes_pod_node_name"}) {
			setsInstance = true
		}
	}
	if !keepsPort || !setsInstance {
		t.Errorf("kubernetes scrape config: keeps the metrics port %v, instance from the node name %v", keepsPort, setsInstance)
	}
}

// k8sObject is the part of a manifest the consistency checks read.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		ClusterIP           string        `yaml:"clusterIP"`
		Ports               []k8sPort     `yaml:"ports"`
		PodMetricsEndpoints []k8sEndpoint `yaml:"podMetricsEndpoints"`
		Endpoints           []k8sEndpoint `yaml:"endpoints"`
		Groups              []any         `yaml:"groups"` // PrometheusRule
		Template            struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				HostPID     bool                `yaml:"hostPID"`
				Tolerations []map[string]string `yaml:"tolerations"`
				Containers  []struct {
					Name string   `yaml:"name"`
					Args []string `yaml:"args"`
					Env  []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					Resources struct {
						Limits   map[string]string `yaml:"limits"`
						Requests map[string]string `yaml:"requests"`
					} `yaml:"resources"`
					SecurityContext k8sSecurityContext `yaml:"securityContext"`
					VolumeMounts    []k8sVolumeMount   `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []k8sVolume `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sSecurityContext struct {
	RunAsUser                *int  `yaml:"runAsUser"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
	Privileged               bool  `yaml:"privileged"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
		Add  []string `yaml:"add"`
	} `yaml:"capabilities"`
}

// The pod's volumes and their mounts, as asshipped.RunFlags reads them.
type (
	k8sVolumeMount = asshipped.VolumeMount
	k8sVolume      = asshipped.Volume
)

// podMount is a container's volume mount with the pod volume it names.
type podMount struct {
	k8sVolumeMount
	Volume k8sVolume
}

// podMounts returns a container's volume mounts by path, each with the pod
// volume it names. A mount that names no volume, and a hostPath volume
// mounted at another path than the node's (the agent reads the node's
// paths from its configuration), are errors.
func podMounts(t *testing.T, volumes []k8sVolume, mounts []k8sVolumeMount) map[string]podMount {
	t.Helper()
	byName := map[string]k8sVolume{}
	for _, v := range volumes {
		byName[v.Name] = v
	}
	out := map[string]podMount{}
	for _, m := range mounts {
		v, ok := byName[m.Name]
		if !ok {
			t.Errorf("volumeMount %s names no volume", m.Name)
			continue
		}
		if v.HostPath != nil && v.HostPath.Path != m.MountPath {
			t.Errorf("hostPath %s is mounted at %s: the agent needs the node's paths", v.HostPath.Path, m.MountPath)
		}
		out[m.MountPath] = podMount{k8sVolumeMount: m, Volume: v}
	}
	return out
}

type k8sPort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type k8sEndpoint struct {
	Port        string `yaml:"port"`
	Path        string `yaml:"path"`
	Relabelings []struct {
		SourceLabels []string `yaml:"sourceLabels"`
		TargetLabel  string   `yaml:"targetLabel"`
	} `yaml:"relabelings"`
}

// kubernetesVersion is the Kubernetes API version the manifests are
// validated against (one kubernetes-validate bundles).
const kubernetesVersion = "1.33.0"

// TestKubernetesManifests validates every manifest with kubernetes-validate
// in strict mode: the JSON schemas generated from Kubernetes' OpenAPI
// specification, which reject unknown fields, wrong types and missing
// required fields, offline. (kubectl would need an API server for
// discovery; kubeconform would download its schemas at run time.) Then it
// checks what no schema can: the DaemonSet's selector matches its pods,
// every mount names a volume, the data root is mounted at the node's path,
// the ConfigMap it mounts exists and holds a valid agent configuration.
func TestKubernetesManifests(t *testing.T) {
	kv := tool(t, "kubernetes-validate", "/opt/layerprobe-test-tools/bin")
	files, err := filepath.Glob(repoPath("deploy/kubernetes/*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("manifests: %v %v", files, err)
	}
	args := append([]string{"--strict", "--kubernetes-version", kubernetesVersion}, files...)
	r := run(t, 2*time.Minute, "", nil, kv, args...)
	if r.err != nil {
		t.Errorf("kubernetes-validate:\n%s", r)
	}
	if n := strings.Count(r.stdout+r.stderr, " passed "); n < len(files) {
		t.Errorf("kubernetes-validate passed %d resources, want at least %d:\n%s", n, len(files), r)
	}
	// The validator rejects a misspelt field.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	b, _ := os.ReadFile(repoPath("deploy/kubernetes/20-daemonset.yaml"))
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "readOnlyRootFilesystem", "readOnlyRootFilesytem", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, time.Minute, "", nil, kv, "--strict", "--kubernetes-version", kubernetesVersion, bad); r.err == nil {
		t.Errorf("kubernetes-validate accepted a misspelt field:\n%s", r)
	}
}

func TestKubernetesConsistency(t *testing.T) {
	files, _ := filepath.Glob(repoPath("deploy/kubernetes/*.yaml"))
	objs := map[string]k8sObject{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		for {
			var o k8sObject
			if err := dec.Decode(&o); err != nil {
				break
			}
			objs[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	// `kubectl apply -f deploy/kubernetes/` applies the files in name order:
	// the namespace must come first.
	if len(files) == 0 || !strings.Contains(readFile(t, files[0]), "kind: Namespace") {
		t.Errorf("the first manifest by name (%v) is not the Namespace", files)
	}
	ns, ds, cm := objs["Namespace/layerprobe"], objs["DaemonSet/layerprobe"], objs["ConfigMap/layerprobe-config"]
	if ns.Kind == "" || ds.Kind == "" || cm.Kind == "" {
		t.Fatalf("want Namespace/layerprobe, DaemonSet/layerprobe and ConfigMap/layerprobe-config; have %v", objs)
	}
	if ns.Metadata.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Error("the namespace does not allow the privileged Pod Security level the DaemonSet needs (hostPath, hostPID)")
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod labels %v", k, v, ds.Spec.Template.Metadata.Labels)
		}
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || len(spec.Containers) != 1 {
		t.Fatalf("pod spec: hostPID %v, %d containers", spec.HostPID, len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Resources.Limits["memory"] == "" || c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Errorf("resources: %+v", c.Resources)
	}
	checkPodSecurityContext(t, c.SecurityContext)
	if len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9811 {
		t.Errorf("ports: %+v", c.Ports)
	}
	mounts := podMounts(t, spec.Volumes, c.VolumeMounts)
	for path, m := range mounts {
		if path == "/var/lib/docker" && !m.ReadOnly {
			t.Error("the data root is mounted writable; only the scratch directory needs to be")
		}
		if v := m.Volume; v.ConfigMap != nil && objs["ConfigMap/"+v.ConfigMap.Name].Kind == "" {
			t.Errorf("volume %s names ConfigMap %s, which is not shipped", v.Name, v.ConfigMap.Name)
		}
	}
	for _, p := range []string{"/run", "/var/lib/docker", "/var/lib/docker/layerprobe-scratch", "/var/lib/layerprobe", "/run/lock", "/etc/layerprobe", "/tmp", "/sys/fs/cgroup"} {
		if _, ok := mounts[p]; !ok {
			t.Errorf("nothing mounted at %s (mounts %v)", p, slices.Sorted(maps.Keys(mounts)))
		}
	}
	// The socket's directory, read-only, and of a type any node has: a
	// node without the socket starts the pod, whose agent says so.
	if m := mounts["/run"]; !m.ReadOnly || m.Volume.HostPath == nil || m.Volume.HostPath.Type != "Directory" {
		t.Errorf("the node's /run (the Docker socket's directory): %+v, want a read-only hostPath of type Directory", m)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && (v.HostPath.Type == "Socket" || v.HostPath.Type == "File") {
			t.Errorf("hostPath %s of type %s: a node without it keeps the pod from starting", v.HostPath.Path, v.HostPath.Type)
		}
	}
	if m := mounts["/sys/fs/cgroup"]; m.ReadOnly || m.Volume.HostPath == nil {
		t.Error("the node's /sys/fs/cgroup is not mounted writable: the host arm cannot join the probe container's CPU cgroups")
	}
	if !slices.Equal(c.Args, []string{"agent", "--config", "/etc/layerprobe/config.yaml"}) || cm.Data["config.yaml"] == "" {
		t.Errorf("args %v, config map keys %v: want the agent reading config.yaml from the ConfigMap", c.Args, cm.Data)
	}
}

// checkPodSecurityContext: the agent's container runs as uid 0 with one
// capability, CAP_SYS_ADMIN (the host arm enters the probe's cgroup
// namespace on cgroup v2 nodes), cannot gain privileges, has a read-only
// root file system, and is not privileged.
func checkPodSecurityContext(t *testing.T, sc k8sSecurityContext) {
	t.Helper()
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		!sc.ReadOnlyRootFilesystem || sc.Privileged || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) ||
		!slices.Equal(sc.Capabilities.Add, []string{"SYS_ADMIN"}) {
		t.Errorf("securityContext: %+v", sc)
	}
}

// TestShippedAgentConfigs: the agent configurations the compose stack and
// the Kubernetes ConfigMap ship pass `layerprobe config check`, and agree
// with the interval the alert rules assume.
func TestShippedAgentConfigs(t *testing.T) {
	bin := agentBinary(t)
	var cm k8sObject
	b, err := os.ReadFile(repoPath("deploy/kubernetes/10-configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	k8sCfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(k8sCfg, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{repoPath("deploy/compose/layerprobe/config.yaml"), k8sCfg} {
		r := run(t, time.Minute, "", nil, bin, "config", "check", f)
		if r.err != nil {
			t.Errorf("layerprobe config check %s:\n%s", f, r)
		}
		c, _ := os.ReadFile(f)
		if want := fmt.Sprintf("interval: %s", strings.TrimSuffix(assumedInterval.String(), "0m0s")); !strings.Contains(string(c), want) {
			t.Errorf("%s does not set %q, the interval the alert rules assume", f, want)
		}
	}
}

// unitDirectives parses a systemd unit: key to values, per section.
var unitDirectives = asshipped.UnitDirectives

const unitFile = asshipped.UnitFile

// TestSystemdUnit checks the unit with systemd itself: `systemd-analyze
// verify` (syntax, unknown directives, executables; ExecStart is pointed at
// a freshly built binary, since /usr/bin/layerprobe is not installed
// here) and `systemd-analyze security --offline` (the exposure score must
// stay at 3.0 or below). Then the hardening the unit must have: dedicated
// privileges reasoned in comments, ProtectSystem, NoNewPrivileges,
// ReadWritePaths for the state and scratch directories.
func TestSystemdUnit(t *testing.T) {
	sa := tool(t, "systemd-analyze")
	bin := agentBinary(t)
	b, err := os.ReadFile(repoPath(unitFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "ExecStart=/usr/bin/layerprobe agent") {
		t.Fatal("ExecStart does not run /usr/bin/layerprobe agent")
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, "layerprobe.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(b), "/usr/bin/layerprobe", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, time.Minute, dir, nil, sa, "verify", unit)
	if r.err != nil || strings.TrimSpace(r.stdout+r.stderr) != "" {
		t.Errorf("systemd-analyze verify: want silence:\n%s", r)
	}
	r = run(t, time.Minute, dir, nil, sa, "security", "--offline=true", "--threshold=30", unit)
	if r.err != nil {
		t.Errorf("systemd-analyze security: exposure above 3.0:\n%s", testharness.Tail(r.stdout, 3))
	}
	if m := regexp.MustCompile(`Overall exposure level for layerprobe.service: ([\d.]+)`).FindStringSubmatch(r.stdout); m == nil {
		t.Errorf("systemd-analyze security printed no exposure level:\n%s", r)
	} else {
		t.Logf("systemd-analyze security: exposure %s", m[1])
	}
	// The validator is not a rubber stamp: a typo is reported.
	typo := filepath.Join(dir, "typo.service")
	if err := os.WriteFile(typo, []byte(strings.Replace(string(b), "ProtectHome=", "ProtectHom=", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, time.Minute, dir, nil, sa, "verify", typo); !strings.Contains(r.stderr, "Unknown key") {
		t.Errorf("systemd-analyze verify did not report a misspelt directive:\n%s", r)
	}

	d := unitDirectives(t, repoPath(unitFile))
	want := map[string]string{
		"Service.ProtectSystem":         "strict",
		"Service.NoNewPrivileges":       "yes",
		"Service.CapabilityBoundingSet": "",
		"Service.StateDirectory":        "layerprobe",
		"Service.PrivateTmp":            "yes",
		"Service.ProtectHome":           "yes",
	}
	for k, v := range want {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%v, want %q", k, got, v)
		}
	}
	var rw []string
	for _, p := range strings.Fields(strings.Join(d["Service.ReadWritePaths"], " ")) {
		rw = append(rw, strings.TrimPrefix(p, "-")) // "-": skipped while missing
	}
	for _, p := range []string{"/var/lib/docker/layerprobe-scratch", "/run/lock",
		// The CPU cgroups the host arm joins (cgroup v1 and v2).
		"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpuset", "/sys/fs/cgroup/system.slice"} {
		if !slices.Contains(rw, p) {
			t.Errorf("ReadWritePaths %v lacks %s", rw, p)
		}
	}
	if got := d["Service.ProtectControlGroups"]; len(got) != 1 || got[0] != "yes" {
		t.Errorf("ProtectControlGroups=%v: the rest of the cgroup file system stays read-only", got)
	}
	// Every privilege the unit keeps is explained next to it.
	text := string(b)
	for _, reason := range []string{"uid 0", "Docker socket", "scratch directory", "/run/lock", "state directory"} {
		if !strings.Contains(text, reason) {
			t.Errorf("the unit's comments do not explain %q", reason)
		}
	}
}

// TestYAMLLint runs yamllint (syntax, duplicate keys, indentation, trailing
// spaces) over every YAML file of the kit.
func TestYAMLLint(t *testing.T) {
	yl := tool(t, "yamllint")
	var files []string
	for _, pat := range []string{"deploy/*/*.yml", "deploy/*/*.yaml", "deploy/*/*/*.yml", "deploy/*/*/*.yaml", "deploy/*/*/*/*.yml", "deploy/*/*/*/*/*.yml"} {
		m, _ := filepath.Glob(repoPath(pat))
		for _, f := range m {
			rel, _ := filepath.Rel(repoRoot, f)
			files = append(files, rel)
		}
	}
	if len(files) < 10 {
		t.Fatalf("found only %d YAML files: %v", len(files), files)
	}
	// Rule unit tests hold whole series names and expanded annotations on
	// one line each, and so do the rules the mixin builds (its jsonnet is
	// the source people read); elsewhere lines stay short.
	conf := `{extends: default, rules: {line-length: {max: 160, ignore: "deploy/prometheus/tests/\n` +
		rulesFile + `\n` + operatorRuleFile + `\n` + chartPath + `/files/"}, ` +
		`document-start: disable, truthy: {check-keys: false}, comments: {min-spaces-from-content: 1}}}`
	args := append([]string{"--strict", "-d", conf}, files...)
	if r := run(t, time.Minute, "", nil, yl, args...); r.err != nil {
		t.Errorf("yamllint:\n%s", r)
	}
}
