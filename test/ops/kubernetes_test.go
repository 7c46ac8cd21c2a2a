package ops

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The Prometheus Operator objects and the Helm chart. kubernetes-validate
// has no schema for the operator's kinds (PodMonitor, ServiceMonitor,
// PrometheusRule): their rules go through promtool, and what ties them to
// the DaemonSet (selectors, port names) is checked here.

const (
	chartPath          = "deploy/helm/layerprobe"
	operatorRuleFile   = "deploy/kubernetes/prometheus-operator/prometheusrule.yaml"
	operatorPodMonitor = "deploy/kubernetes/prometheus-operator/podmonitor.yaml"
)

// decodeObjects reads every document of a multi-document YAML text.
func decodeObjects(t *testing.T, text string) []k8sObject {
	t.Helper()
	var out []k8sObject
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("decode: %v", err)
			}
			return out
		}
		if o.Kind != "" {
			out = append(out, o)
		}
	}
}

// serviceSelector reads a Service's spec.selector, a plain label map.
func serviceSelector(t *testing.T, text, name string) map[string]string {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Spec struct {
				Selector map[string]string `yaml:"selector"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("no Service %s", name)
		}
		if o.Kind == "Service" && o.Metadata.Name == name {
			return o.Spec.Selector
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkRuleGroups runs promtool on a PrometheusRule's groups and checks
// that they are the shipped rules file's.
func checkRuleGroups(t *testing.T, where string, groups []any) {
	t.Helper()
	var shipped struct {
		Groups []any `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, repoPath(rulesFile))), &shipped); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := yaml.Marshal(map[string]any{"groups": shipped.Groups})
	if string(b) != string(want) {
		t.Errorf("%s: the PrometheusRule's groups differ from %s", where, rulesFile)
	}
	f := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, time.Minute, "", nil, tool(t, "promtool"), "check", "rules", "--lint=all", "--lint-fatal", f); r.err != nil {
		t.Errorf("%s: promtool check rules:\n%s", where, r)
	}
}

func TestPrometheusOperatorObjects(t *testing.T) {
	ds := decodeObjects(t, readFile(t, repoPath("deploy/kubernetes/20-daemonset.yaml")))[0]
	pods := ds.Spec.Template.Metadata.Labels
	svcText := readFile(t, repoPath("deploy/kubernetes/30-service.yaml"))
	svc := decodeObjects(t, svcText)[0]
	if !selects(serviceSelector(t, svcText, "layerprobe"), pods) || svc.Spec.ClusterIP != "None" ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != "metrics" {
		t.Errorf("Service: selector %v for pods %v, clusterIP %q, ports %+v", serviceSelector(t, svcText, "layerprobe"), pods, svc.Spec.ClusterIP, svc.Spec.Ports)
	}
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Tolerations, func(tl map[string]string) bool {
		return tl["operator"] == "Exists" && tl["key"] == "" && tl["effect"] == ""
	}) {
		t.Errorf("the DaemonSet does not tolerate every taint: %v", ds.Spec.Template.Spec.Tolerations)
	}

	pm := decodeObjects(t, readFile(t, repoPath(operatorPodMonitor)))[0]
	if pm.Kind != "PodMonitor" || pm.Metadata.Namespace != ds.Metadata.Namespace || !selects(pm.Spec.Selector.MatchLabels, pods) {
		t.Errorf("PodMonitor %s/%s selects %v; the pods have %v", pm.Metadata.Namespace, pm.Metadata.Name, pm.Spec.Selector.MatchLabels, pods)
	}
	checkEndpoints(t, "PodMonitor", pm.Spec.PodMetricsEndpoints)

	pr := decodeObjects(t, readFile(t, repoPath(operatorRuleFile)))[0]
	if pr.Kind != "PrometheusRule" || pr.Metadata.Namespace != ds.Metadata.Namespace {
		t.Errorf("%s: %s in %q", operatorRuleFile, pr.Kind, pr.Metadata.Namespace)
	}
	checkRuleGroups(t, operatorRuleFile, pr.Spec.Groups)
}

// checkEndpoints: one endpoint on the metrics port that names the target
// after the node, as the plain scrape configuration does.
func checkEndpoints(t *testing.T, kind string, eps []k8sEndpoint) {
	t.Helper()
	if len(eps) != 1 || eps[0].Port != "metrics" || eps[0].Path != "/metrics" {
		t.Errorf("%s endpoints %+v: want the metrics port", kind, eps)
		return
	}
	if !slices.ContainsFunc(eps[0].Relabelings, func(r struct {
		SourceLabels []string `yaml:"sourceLabels"`
		TargetLabel  string   `yaml:"targetLabel"`
	}) bool {
		return r.TargetLabel == "instance" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_node_name"})
	}) {
		t.Errorf("%s: instance is not named after the node: %+v", kind, eps[0].Relabelings)
	}
}

// helmTemplate renders the chart with values; it fails the test when helm
// does, unless wantErr is set, when it returns helm's output instead.
func helmTemplate(t *testing.T, helm string, wantErr bool, set ...string) string {
	t.Helper()
	args := []string{"template", "lp", repoPath(chartPath), "--namespace", "layerprobe", "--kube-version", kubernetesVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	r := run(t, time.Minute, "", nil, helm, args...)
	if wantErr {
		if r.err == nil {
			t.Errorf("helm template %v succeeded", set)
		}
		return r.stdout + r.stderr
	}
	if r.err != nil {
		t.Fatalf("helm template %v:\n%s", set, r)
	}
	return r.stdout
}

// TestHelmChart lints the chart, renders it with its defaults and with
// every option on, validates what it renders with kubernetes-validate and
// checks that the values reach the objects.
func TestHelmChart(t *testing.T) {
	helm := tool(t, "helm", "/opt/layerprobe-test-tools/bin")
	kv := tool(t, "kubernetes-validate", "/opt/layerprobe-test-tools/bin")
	if r := run(t, time.Minute, "", nil, helm, "lint", "--strict", "--kube-version", kubernetesVersion, repoPath(chartPath)); r.err != nil {
		t.Errorf("helm lint:\n%s", r)
	}

	validate := func(name, text string, core int) {
		f := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		r := run(t, 2*time.Minute, "", nil, kv, "--strict", "--kubernetes-version", kubernetesVersion, f)
		if r.err != nil {
			t.Errorf("kubernetes-validate (%s):\n%s", name, r)
		}
		if n := strings.Count(r.stdout+r.stderr, " passed "); n != core {
			t.Errorf("kubernetes-validate (%s) passed %d resources, want %d:\n%s", name, n, core, r)
		}
	}

	def := helmTemplate(t, helm, false)
	validate("defaults", def, 4) // ServiceAccount, ConfigMap, Service, DaemonSet
	kinds := func(objs []k8sObject) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.Kind)
		}
		slices.Sort(out)
		return out
	}
	if got := kinds(decodeObjects(t, def)); !slices.Equal(got, []string{"ConfigMap", "DaemonSet", "Service", "ServiceAccount"}) {
		t.Errorf("defaults render %v", got)
	}
	checkHelmDefaults(t, objectMaps(t, def))
	// Kubernetes' own engine by default: containerd's agent, with
	// CAP_SYS_ADMIN for the host arm's join on cgroup v2 nodes, or with
	// no capability when the operator turns that off.
	for _, o := range decodeObjects(t, def) {
		if o.Kind == "DaemonSet" && !strings.Contains(def, `layerprobe.io/containerd: "true"`) {
			t.Errorf("the default DaemonSet is not containerd's:\n%s", def)
		}
	}
	for _, o := range decodeObjects(t, helmTemplate(t, helm, false, "cgroupNamespaceJoin=false")) {
		if o.Kind == "DaemonSet" {
			if caps := o.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities; !slices.Equal(caps.Drop, []string{"ALL"}) || len(caps.Add) != 0 {
				t.Errorf("cgroupNamespaceJoin=false: capabilities %+v, want none", caps)
			}
		}
	}

	all := helmTemplate(t, helm, false, "monitor.enabled=true", "prometheusRule.enabled=true", "dashboards.enabled=true",
		"engine.type=docker", "engine.socket=/run/docker-alt.sock", "engine.dataRoot=/srv/docker", "stateDir=/srv/layerprobe",
		"networkPolicy.enabled=true", "serviceAccount.name=probe", "serviceAccount.annotations.owner=storage", "commonLabels.fleet=eu",
		"monitor.jobLabel=app.kubernetes.io/name", "monitor.podTargetLabels={team,fleet}", "monitor.sampleLimit=2000000", "monitor.targetLimit=100",
		"port=9900")
	validate("all", all, 7) // and the two dashboard ConfigMaps
	objs := decodeObjects(t, all)
	if got := kinds(objs); !slices.Equal(got, []string{"ConfigMap", "ConfigMap", "ConfigMap", "DaemonSet", "NetworkPolicy", "PodMonitor", "PrometheusRule", "Service", "ServiceAccount"}) {
		t.Errorf("everything on renders %v", got)
	}
	checkHelmAllOn(t, objectMaps(t, all))
	byKind := map[string]k8sObject{}
	dashboards := map[string]string{}
	for _, o := range objs {
		byKind[o.Kind] = o
		for k, v := range o.Data {
			if strings.HasSuffix(k, ".json") {
				dashboards[k] = v
			}
		}
	}
	ds := byKind["DaemonSet"]
	spec := ds.Spec.Template.Spec
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.HostPath.Path] = v.HostPath.Type
		}
	}
	// The socket's directory, which any node has: a node without the
	// socket runs the agent, which says so.
	for path, typ := range map[string]string{"/run": "Directory", "/srv/docker": "Directory", "/srv/docker/layerprobe-scratch": "DirectoryOrCreate", "/srv/layerprobe": "DirectoryOrCreate"} {
		if hostPaths[path] != typ {
			t.Errorf("hostPath %s: type %q, want %s (have %v)", path, hostPaths[path], typ, hostPaths)
		}
	}
	c := spec.Containers[0]
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = true
	}
	for _, p := range []string{"/run", "/srv/docker", "/srv/docker/layerprobe-scratch", "/srv/layerprobe", "/etc/layerprobe"} {
		if !mounts[p] {
			t.Errorf("nothing mounted at %s: the agent needs the node's paths", p)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	}) bool {
		return e.Name == "DOCKER_HOST" && e.Value == "unix:///run/docker-alt.sock"
	}) || !slices.Contains(c.Args, "/srv/layerprobe") {
		t.Errorf("the agent is not pointed at the engine socket and state directory: env %v, args %v", c.Env, c.Args)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl map[string]string) bool { return tl["operator"] == "Exists" && tl["key"] == "" }) {
		t.Errorf("the chart's DaemonSet does not tolerate every taint: %v", spec.Tolerations)
	}
	pods := ds.Spec.Template.Metadata.Labels
	if !selects(ds.Spec.Selector.MatchLabels, pods) || !selects(byKind["PodMonitor"].Spec.Selector.MatchLabels, pods) ||
		!selects(serviceSelector(t, all, byKind["Service"].Metadata.Name), pods) {
		t.Errorf("selectors do not match the pods' labels %v", pods)
	}
	checkEndpoints(t, "PodMonitor", byKind["PodMonitor"].Spec.PodMetricsEndpoints)
	checkRuleGroups(t, "chart PrometheusRule", byKind["PrometheusRule"].Spec.Groups)
	for _, name := range []string{"layerprobe-fleet.json", "layerprobe-host.json"} {
		if dashboards[name] != strings.TrimSuffix(readFile(t, repoPath("dashboards/"+name)), "\n") {
			t.Errorf("the chart's %s is not dashboards/%s", name, name)
		}
	}

	sm := decodeObjects(t, helmTemplate(t, helm, false, "monitor.enabled=true", "monitor.kind=ServiceMonitor"))
	for _, o := range sm {
		if o.Kind == "ServiceMonitor" {
			checkEndpoints(t, "ServiceMonitor", o.Spec.Endpoints)
		}
	}
	if !slices.Contains(kinds(sm), "ServiceMonitor") {
		t.Errorf("monitor.kind=ServiceMonitor renders %v", kinds(sm))
	}
	// engine.type containerd: the containerd agent, as the manifests' variant
	// has it, with the socket elsewhere (k3s) too.
	for _, set := range [][]string{{"engine.type=containerd"}, {"engine.type=containerd", "engine.socket=/run/k3s/containerd/containerd.sock"}} {
		t.Run(strings.Join(set, ","), func(t *testing.T) {
			text := helmTemplate(t, helm, false, set...)
			validate("containerd", text, 4)
			byKind := map[string]k8sObject{}
			for _, o := range decodeObjects(t, text) {
				byKind[o.Kind] = o
			}
			ds := byKind["DaemonSet"]
			if !strings.Contains(text, `layerprobe.io/containerd: "true"`) || strings.Contains(text, "layerprobe.io/docker-engine") {
				t.Errorf("the containerd agent does not run on the nodes labelled layerprobe.io/containerd=true:\n%s", text)
			}
			if len(ds.Spec.Template.Spec.Containers) == 1 && len(ds.Spec.Template.Spec.Containers[0].Env) > 0 {
				t.Errorf("env %v: a containerd agent has no DOCKER_HOST", ds.Spec.Template.Spec.Containers[0].Env)
			}
			checkContainerdAgent(t, "the chart", ds, byKind["ConfigMap"])
		})
	}

	// Values the chart cannot honour fail with a message that names them.
	for set, want := range map[string]string{
		"engine.type=rkt":       "engine.type",
		"monitor.kind=Probe":    "monitor.kind",
		"service.enabled=false": "service.enabled",
	} {
		args := []string{set}
		if set == "service.enabled=false" {
			args = append(args, "monitor.enabled=true", "monitor.kind=ServiceMonitor")
		} else if strings.HasPrefix(set, "monitor") {
			args = append(args, "monitor.enabled=true")
		}
		// The template's own message names engine.type; the schema's
		// names /engine/type.
		if out := helmTemplate(t, helm, true, args...); !strings.Contains(out, want) && !strings.Contains(out, "'/"+strings.ReplaceAll(want, ".", "/")+"'") {
			t.Errorf("helm template --set %v: %q does not name %s", args, out, want)
		}
	}
}

// helmSchemaRejects are values values.schema.json must refuse, each with
// the path helm's message names.
var helmSchemaRejects = []struct {
	set  []string
	path string
}{
	{[]string{"global=mirror"}, "/global"},
	{[]string{"global.imageRegistry=1"}, "/global/imageRegistry"},
	{[]string{"commonLabels.team=1"}, "/commonLabels/team"},
	{[]string{"podSecurityContext=privileged"}, "/podSecurityContext"},
	{[]string{"serviceAccount.create=maybe"}, "/serviceAccount/create"},
	{[]string{"serviceAccount.automountServiceAccountToken=true"}, "/serviceAccount"},
	{[]string{"networkPolicy.enabled=yes"}, "/networkPolicy/enabled"},
	{[]string{"networkPolicy.ingress=all"}, "/networkPolicy/ingress"},
	{[]string{"updateStrategy.type=Recreate"}, "/updateStrategy/type"},
	{[]string{"revisionHistoryLimit=-1"}, "/revisionHistoryLimit"},
	{[]string{"terminationGracePeriodSeconds=-1"}, "/terminationGracePeriodSeconds"},
	{[]string{"readinessProbe.periodSeconds=0"}, "/readinessProbe/periodSeconds"},
	{[]string{"livenessProbe.successThreshold=2"}, "/livenessProbe/successThreshold"},
	{[]string{"livenessProbe.httpGet.path=/metrics"}, "/livenessProbe"},
	{[]string{"extraVolumes[0].emptyDir.medium=Memory"}, "/extraVolumes/0"},
	{[]string{"extraVolumeMounts[0].name=extra"}, "/extraVolumeMounts/0"},
	{[]string{"service.type=ExternalName"}, "/service/type"},
	{[]string{"service.port=70000"}, "/service/port"},
	{[]string{"service.annotations.a=1"}, "/service/annotations/a"},
	{[]string{"monitor.jobLabel=1"}, "/monitor/jobLabel"},
	{[]string{"monitor.podTargetLabels=team"}, "/monitor/podTargetLabels"},
	{[]string{"monitor.sampleLimit=-1"}, "/monitor/sampleLimit"},
	{[]string{"monitor.targetLimit=-1"}, "/monitor/targetLimit"},
}

// TestHelmChartSchemaRejects: wrong types, ranges and unknown keys of the
// chart's values fail `helm template` with a message that names them.
func TestHelmChartSchemaRejects(t *testing.T) {
	helm := tool(t, "helm", "/opt/layerprobe-test-tools/bin")
	for _, c := range helmSchemaRejects {
		if out := helmTemplate(t, helm, true, c.set...); !strings.Contains(out, "at '"+c.path+"'") {
			t.Errorf("helm template --set %v: %q does not name %s", c.set, out, c.path)
		}
	}
}

// TestHelmChartSubchart installs the chart as a subchart of an umbrella
// chart whose global values carry keys of other charts: the schema must
// let them through, and global.imageRegistry must move the image.
func TestHelmChartSubchart(t *testing.T) {
	helm := tool(t, "helm", "/opt/layerprobe-test-tools/bin")
	parent := t.TempDir()
	if err := os.CopyFS(filepath.Join(parent, "charts", "layerprobe"), os.DirFS(repoPath(chartPath))); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: fleet\nversion: 1.0.0\n",
		"values.yaml": `global:
  imageRegistry: mirror.example.com
  imagePullSecrets: [{name: mirror}]
  storageClass: fast
layerprobe:
  serviceAccount:
    name: probe
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, time.Minute, "", nil, helm, "template", "fleet", parent, "--namespace", "layerprobe", "--kube-version", kubernetesVersion)
	if r.err != nil {
		t.Fatalf("helm template of the umbrella chart:\n%s", r)
	}
	objs := objectMaps(t, r.stdout)
	ds := objs["DaemonSet/fleet-layerprobe"]
	pod := dig[map[string]any](ds, "spec", "template", "spec")
	if got, want := dig[string](pod, "containers", 0, "image"), "mirror.example.com/layerprobe:"+versionFile(t); got != want {
		t.Errorf("image %q, want %q (global.imageRegistry)", got, want)
	}
	if objs["ServiceAccount/probe"] == nil || dig[string](pod, "serviceAccountName") != "probe" {
		t.Errorf("subchart values: ServiceAccount %v, serviceAccountName %q", slices.Sorted(maps.Keys(objs)), dig[string](pod, "serviceAccountName"))
	}
}

// objectMaps decodes a rendered chart into its objects by kind/name.
func objectMaps(t *testing.T, text string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("decode: %v", err)
			}
			return out
		}
		if o != nil {
			out[dig[string](o, "kind")+"/"+dig[string](o, "metadata", "name")] = o
		}
	}
}

// checkHelmDefaults: what the chart sets without values, beside the
// engine: a ServiceAccount and a pod without a token, the pod's seccomp
// profile with the container's privileges as they were, the update and
// probe settings, a headless Service on the agent's port, no NetworkPolicy.
func checkHelmDefaults(t *testing.T, objs map[string]map[string]any) {
	t.Helper()
	sa, ds, svc := objs["ServiceAccount/lp-layerprobe"], objs["DaemonSet/lp-layerprobe"], objs["Service/lp-layerprobe"]
	if sa == nil || ds == nil || svc == nil {
		t.Fatalf("defaults render %v", slices.Sorted(maps.Keys(objs)))
	}
	if v, ok := sa["automountServiceAccountToken"].(bool); !ok || v {
		t.Errorf("ServiceAccount automountServiceAccountToken %v, want false", sa["automountServiceAccountToken"])
	}
	pod := dig[map[string]any](ds, "spec", "template", "spec")
	if v, ok := pod["automountServiceAccountToken"].(bool); !ok || v || dig[string](pod, "serviceAccountName") != "lp-layerprobe" {
		t.Errorf("pod: serviceAccountName %v, automountServiceAccountToken %v", pod["serviceAccountName"], pod["automountServiceAccountToken"])
	}
	if dig[string](pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("pod securityContext %v, want the RuntimeDefault seccomp profile", pod["securityContext"])
	}
	c := dig[map[string]any](pod, "containers", 0)
	if !dig[bool](pod, "hostPID") || dig[int](c, "securityContext", "runAsUser") != 0 || c["securityContext"] == nil ||
		!slices.Equal(dig[[]any](c, "securityContext", "capabilities", "add"), []any{"SYS_ADMIN"}) {
		t.Errorf("the agent's privileges changed: hostPID %v, securityContext %v", pod["hostPID"], c["securityContext"])
	}
	if dig[int](ds, "spec", "revisionHistoryLimit") != 10 || dig[string](ds, "spec", "updateStrategy", "type") != "RollingUpdate" ||
		dig[int](ds, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable") != 1 || dig[int](pod, "terminationGracePeriodSeconds") != 60 {
		t.Errorf("DaemonSet: revisionHistoryLimit %v, updateStrategy %v, terminationGracePeriodSeconds %v",
			dig[any](ds, "spec", "revisionHistoryLimit"), dig[any](ds, "spec", "updateStrategy"), pod["terminationGracePeriodSeconds"])
	}
	for probe, want := range map[string][3]any{"readinessProbe": {"/readyz", 10, 3}, "livenessProbe": {"/healthz", 30, 5}} {
		p := dig[map[string]any](c, probe)
		if dig[string](p, "httpGet", "path") != want[0] || dig[string](p, "httpGet", "port") != "metrics" ||
			dig[int](p, "periodSeconds") != want[1] || dig[int](p, "failureThreshold") != want[2] ||
			dig[int](p, "timeoutSeconds") != 5 || dig[int](p, "successThreshold") != 1 {
			t.Errorf("%s %v, want GET %v every %vs, %v failures", probe, p, want[0], want[1], want[2])
		}
	}
	if dig[string](svc, "spec", "type") != "ClusterIP" || dig[string](svc, "spec", "clusterIP") != "None" ||
		dig[int](svc, "spec", "ports", 0, "port") != 9811 || dig[map[string]any](svc, "metadata", "annotations") != nil {
		t.Errorf("Service spec %v, annotations %v: want headless on 9811", svc["spec"], dig[any](svc, "metadata", "annotations"))
	}
	for k := range objs {
		if strings.HasPrefix(k, "NetworkPolicy/") {
			t.Errorf("%s rendered by default: networkPolicy is off, as node-exporter's", k)
		}
	}
}

// checkHelmAllOn: the NetworkPolicy's own rule (the agent's port, from
// anywhere, no egress), a named ServiceAccount, common labels on every
// object but in no selector, and the PodMonitor's job label and limits.
func checkHelmAllOn(t *testing.T, objs map[string]map[string]any) {
	t.Helper()
	np := objs["NetworkPolicy/lp-layerprobe"]
	ds := objs["DaemonSet/lp-layerprobe"]
	if np == nil || ds == nil {
		t.Fatalf("render %v", slices.Sorted(maps.Keys(objs)))
	}
	podLabels := dig[map[string]any](ds, "spec", "template", "metadata", "labels")
	sel := dig[map[string]any](np, "spec", "podSelector", "matchLabels")
	if len(sel) == 0 || !selectsAny(sel, podLabels) {
		t.Errorf("NetworkPolicy selects %v; the pods have %v", sel, podLabels)
	}
	if !slices.Equal(dig[[]any](np, "spec", "policyTypes"), []any{"Ingress", "Egress"}) ||
		len(dig[[]any](np, "spec", "ingress")) != 1 || dig[any](np, "spec", "ingress", 0, "from") != nil ||
		dig[int](np, "spec", "ingress", 0, "ports", 0, "port") != 9900 ||
		dig[[]any](np, "spec", "egress") == nil || len(dig[[]any](np, "spec", "egress")) != 0 {
		t.Errorf("NetworkPolicy spec %v: want ingress to port 9900 from anywhere, no egress", np["spec"])
	}
	if sa := objs["ServiceAccount/probe"]; sa == nil || dig[string](sa, "metadata", "annotations", "owner") != "storage" ||
		dig[string](ds, "spec", "template", "spec", "serviceAccountName") != "probe" {
		t.Errorf("serviceAccount.name/annotations: %v, pod's %q", slices.Sorted(maps.Keys(objs)), dig[string](ds, "spec", "template", "spec", "serviceAccountName"))
	}
	for k, o := range objs {
		if dig[string](o, "metadata", "labels", "fleet") != "eu" {
			t.Errorf("%s lacks commonLabels: %v", k, dig[any](o, "metadata", "labels"))
		}
	}
	if podLabels["fleet"] != "eu" || dig[any](ds, "spec", "selector", "matchLabels", "fleet") != nil || sel["fleet"] != nil {
		t.Errorf("commonLabels: pod labels %v, selector %v: on the pods, in no selector", podLabels, dig[any](ds, "spec", "selector"))
	}
	pm := objs["PodMonitor/lp-layerprobe"]
	if dig[string](pm, "spec", "jobLabel") != "app.kubernetes.io/name" ||
		!slices.Equal(dig[[]any](pm, "spec", "podTargetLabels"), []any{"team", "fleet"}) ||
		dig[int](pm, "spec", "sampleLimit") != 2000000 || dig[int](pm, "spec", "targetLimit") != 100 {
		t.Errorf("PodMonitor spec %v: want jobLabel, podTargetLabels and the limits", pm["spec"])
	}
}

// selectsAny is selects over decoded maps.
func selectsAny(selector, labels map[string]any) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// helmValuesFiles are the values files TestHelmChartValuesFiles renders
// the chart with, besides its defaults.
var helmValuesFiles = []string{"secured", "placement", "existing-secrets", "operations"}

// TestHelmChartValuesFiles renders the chart under each values file in
// testdata/helm, validates every object with kubernetes-validate (the
// operator's kinds excepted), and checks that the values reach the
// objects: Secrets and their mounts for the web configuration and the API
// token, the monitor's TLS, basic auth, relabelings and timeouts, names,
// image, placement and the securityContext overrides.
func TestHelmChartValuesFiles(t *testing.T) {
	helm := tool(t, "helm", "/opt/layerprobe-test-tools/bin")
	kv := tool(t, "kubernetes-validate", "/opt/layerprobe-test-tools/bin")
	for _, name := range helmValuesFiles {
		t.Run(name, func(t *testing.T) {
			file := repoPath("test/ops/testdata/helm/" + name + ".yaml")
			if r := run(t, time.Minute, "", nil, helm, "lint", "--strict", "--kube-version", kubernetesVersion, "-f", file, repoPath(chartPath)); r.err != nil {
				t.Errorf("helm lint -f %s:\n%s", name, r)
			}
			r := run(t, time.Minute, "", nil, helm, "template", "lp", repoPath(chartPath), "--namespace", "layerprobe",
				"--kube-version", kubernetesVersion, "-f", file)
			if r.err != nil {
				t.Fatalf("helm template -f %s:\n%s", name, r)
			}
			objs := map[string]map[string]any{} // kind/name -> object
			var core []string
			dec := yaml.NewDecoder(strings.NewReader(r.stdout))
			for {
				var o map[string]any
				if err := dec.Decode(&o); err != nil {
					break
				}
				if o == nil {
					continue
				}
				kind, _ := o["kind"].(string)
				objs[kind+"/"+dig[string](o, "metadata", "name")] = o
				if kind != "PodMonitor" && kind != "ServiceMonitor" && kind != "PrometheusRule" {
					b, _ := yaml.Marshal(o)
					core = append(core, string(b))
				}
			}
			f := filepath.Join(t.TempDir(), "core.yaml")
			if err := os.WriteFile(f, []byte(strings.Join(core, "---\n")), 0o600); err != nil {
				t.Fatal(err)
			}
			v := run(t, 2*time.Minute, "", nil, kv, "--strict", "--kubernetes-version", kubernetesVersion, f)
			if v.err != nil || strings.Count(v.stdout+v.stderr, " passed ") != len(core) {
				t.Errorf("kubernetes-validate: %d objects:\n%s", len(core), v)
			}
			checkHelmValues(t, name, objs)
		})
	}
}

// dig walks nested maps and lists (an int indexes a list) and returns the
// value there, or T's zero value.
func dig[T any](v any, path ...any) T {
	var zero T
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return zero
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return zero
			}
			v = l[k]
		}
	}
	t, _ := v.(T)
	return t
}

func checkHelmValues(t *testing.T, name string, objs map[string]map[string]any) {
	t.Helper()
	var ds map[string]any
	for k, o := range objs {
		if strings.HasPrefix(k, "DaemonSet/") {
			ds = o
		}
	}
	if ds == nil {
		t.Fatalf("no DaemonSet among %v", slices.Sorted(maps.Keys(objs)))
	}
	pod := dig[map[string]any](ds, "spec", "template", "spec")
	c := dig[map[string]any](pod, "containers", 0)
	var args []string
	for _, a := range dig[[]any](c, "args") {
		args = append(args, fmt.Sprint(a))
	}
	secretVolumes := map[string]string{} // volume -> secret
	for _, v := range dig[[]any](pod, "volumes") {
		if s := dig[string](v, "secret", "secretName"); s != "" {
			secretVolumes[dig[string](v, "name")] = s
		}
	}
	mounts := map[string]string{}
	for _, m := range dig[[]any](c, "volumeMounts") {
		mounts[dig[string](m, "name")] = dig[string](m, "mountPath")
	}
	hasArgs := func(pair ...string) bool {
		for i := range args {
			if slices.Equal(args[i:min(i+len(pair), len(args))], pair) {
				return true
			}
		}
		return false
	}
	checkSecrets := func(web, token, tokenKey string) {
		t.Helper()
		if secretVolumes["web-config"] != web || mounts["web-config"] != "/etc/layerprobe-web" ||
			!hasArgs("--web.config.file", "/etc/layerprobe-web/web-config.yml") {
			t.Errorf("web config: volumes %v, mounts %v, args %v; want Secret %s at /etc/layerprobe-web", secretVolumes, mounts, args, web)
		}
		if secretVolumes["api-token"] != token || mounts["api-token"] != "/etc/layerprobe-api-token" ||
			!hasArgs("--api-token-file", "/etc/layerprobe-api-token/"+tokenKey) {
			t.Errorf("API token: volumes %v, mounts %v, args %v; want Secret %s, key %s", secretVolumes, mounts, args, token, tokenKey)
		}
	}
	endpoint := func(kind string) map[string]any {
		for k, o := range objs {
			if strings.HasPrefix(k, kind+"/") {
				list := "podMetricsEndpoints"
				if kind == "ServiceMonitor" {
					list = "endpoints"
				}
				return dig[map[string]any](o, "spec", list, 0)
			}
		}
		t.Fatalf("no %s", kind)
		return nil
	}

	switch name {
	case "secured":
		checkSecrets("lp-layerprobe-web-config", "lp-layerprobe-api-token", "token")
		web := objs["Secret/lp-layerprobe-web-config"]
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(dig[string](web, "stringData", "web-config.yml")), &cfg); err != nil ||
			dig[string](cfg, "tls_server_config", "cert_file") != "/etc/layerprobe-web/tls.crt" {
			t.Errorf("web-config.yml in the Secret: %v, %v", cfg, err)
		}
		if !strings.Contains(dig[string](web, "stringData", "tls.key"), "BEGIN EC PRIVATE KEY") {
			t.Errorf("the web config Secret lacks webConfig.files: %v", dig[map[string]any](web, "stringData"))
		}
		if dig[string](objs["Secret/lp-layerprobe-api-token"], "stringData", "token") != "test-token-0123456789abcdef" {
			t.Errorf("API token Secret: %v", objs["Secret/lp-layerprobe-api-token"])
		}
		for _, probe := range []string{"readinessProbe", "livenessProbe"} {
			if dig[string](c, probe, "tcpSocket", "port") != "metrics" || dig[map[string]any](c, probe, "httpGet") != nil {
				t.Errorf("%s %v: with basic auth the probes check the port", probe, c[probe])
			}
		}
		ep := endpoint("PodMonitor")
		if dig[string](ep, "scheme") != "https" || dig[string](ep, "interval") != "1m" || dig[string](ep, "scrapeTimeout") != "20s" ||
			dig[string](ep, "tlsConfig", "serverName") != "layerprobe" || dig[string](ep, "basicAuth", "password", "name") != "layerprobe-scrape" ||
			len(dig[[]any](ep, "relabelings")) != 2 || dig[string](ep, "relabelings", 1, "targetLabel") != "cluster" ||
			dig[string](ep, "metricRelabelings", 0, "action") != "drop" {
			t.Errorf("PodMonitor endpoint: %v", ep)
		}
	case "existing-secrets":
		checkSecrets("layerprobe-web", "layerprobe-token", "api-token")
		for k := range objs {
			if strings.HasPrefix(k, "Secret/") {
				t.Errorf("%s rendered: the values name existing Secrets", k)
			}
		}
		if dig[string](ds, "metadata", "name") != "layerprobe" {
			t.Errorf("fullnameOverride: DaemonSet %q", dig[string](ds, "metadata", "name"))
		}
		for _, probe := range []string{"readinessProbe", "livenessProbe"} {
			if dig[string](c, probe, "httpGet", "scheme") != "HTTPS" {
				t.Errorf("%s %v: TLS without basic auth probes over HTTPS", probe, c[probe])
			}
		}
		ep := endpoint("ServiceMonitor")
		if dig[string](ep, "scheme") != "https" || dig[bool](ep, "tlsConfig", "insecureSkipVerify") != true {
			t.Errorf("ServiceMonitor endpoint: %v", ep)
		}
	case "operations":
		checkHelmOperations(t, objs, ds, pod, c)
	case "placement":
		if got := dig[string](ds, "metadata", "name"); got != "lp-storage-probe" {
			t.Errorf("nameOverride: DaemonSet %q", got)
		}
		if got := dig[string](ds, "spec", "template", "metadata", "labels", "app.kubernetes.io/name"); got != "storage-probe" {
			t.Errorf("nameOverride: name label %q", got)
		}
		want := "registry.example.com/infra/layerprobe@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		if dig[string](c, "image") != want || dig[string](c, "imagePullPolicy") != "Always" {
			t.Errorf("image %q %q, want %q", dig[string](c, "image"), dig[string](c, "imagePullPolicy"), want)
		}
		if dig[string](pod, "priorityClassName") != "system-node-critical" ||
			dig[string](pod, "nodeSelector", "storage.example.com/probe") != "yes" ||
			dig[string](pod, "tolerations", 0, "key") != "dedicated" || len(dig[[]any](pod, "tolerations")) != 1 ||
			dig[map[string]any](pod, "affinity", "nodeAffinity") == nil ||
			dig[string](pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" ||
			dig[string](pod, "imagePullSecrets", 0, "name") != "registry-credentials" {
			t.Errorf("placement values do not reach the pod: %v", pod)
		}
		if dig[string](c, "resources", "limits", "memory") != "1Gi" || dig[map[string]any](c, "securityContext", "seccompProfile") != nil ||
			!hasArgs("--log.level=debug", "--log.format=json") {
			t.Errorf("container: resources %v, securityContext %v, args %v", c["resources"], c["securityContext"], args)
		}
		env := map[string]string{}
		for _, e := range dig[[]any](c, "env") {
			env[dig[string](e, "name")] = dig[string](e, "value")
		}
		if env["TZ"] != "UTC" || env["DOCKER_HOST"] != "unix:///var/run/docker.sock" {
			t.Errorf("env %v: want TZ beside DOCKER_HOST", env)
		}
		if dig[string](ds, "spec", "template", "metadata", "labels", "team") != "storage" ||
			dig[string](ds, "spec", "template", "metadata", "annotations", "example.com/team") != "storage" {
			t.Errorf("podLabels/podAnnotations: %v", dig[map[string]any](ds, "spec", "template", "metadata"))
		}
	}
}

// checkHelmOperations checks testdata/helm/operations.yaml's values in
// the objects.
func checkHelmOperations(t *testing.T, objs map[string]map[string]any, ds, pod, c map[string]any) {
	t.Helper()
	if got, want := dig[string](c, "image"), "mirror.example.com/layerprobe:"+versionFile(t); got != want {
		t.Errorf("image %q, want %q: global.imageRegistry replaces image.registry", got, want)
	}
	for k, o := range objs {
		if dig[string](o, "metadata", "labels", "team") != "storage" || dig[string](o, "metadata", "labels", "cost-center") != "4711" {
			t.Errorf("%s lacks commonLabels: %v", k, dig[any](o, "metadata", "labels"))
		}
		if strings.HasPrefix(k, "ServiceAccount/") {
			t.Errorf("%s rendered with serviceAccount.create false", k)
		}
	}
	if dig[string](ds, "spec", "template", "metadata", "labels", "team") != "storage" || dig[any](ds, "spec", "selector", "matchLabels", "team") != nil {
		t.Errorf("commonLabels: pod labels %v, selector %v", dig[any](ds, "spec", "template", "metadata", "labels"), dig[any](ds, "spec", "selector"))
	}
	if v, ok := pod["automountServiceAccountToken"].(bool); !ok || v || dig[string](pod, "serviceAccountName") != "node-agents" {
		t.Errorf("pod: serviceAccountName %v, automountServiceAccountToken %v", pod["serviceAccountName"], pod["automountServiceAccountToken"])
	}
	np := objs["NetworkPolicy/lp-layerprobe"]
	if dig[string](np, "spec", "ingress", 0, "from", 0, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name") != "monitoring" ||
		len(dig[[]any](np, "spec", "ingress")) != 1 || len(dig[[]any](np, "spec", "egress")) != 0 ||
		dig[any](np, "spec", "podSelector", "matchLabels", "team") != nil {
		t.Errorf("NetworkPolicy spec %v: want networkPolicy.ingress's rule and no egress", np["spec"])
	}
	if dig[string](ds, "spec", "updateStrategy", "type") != "OnDelete" || dig[any](ds, "spec", "updateStrategy", "rollingUpdate") != nil ||
		dig[int](ds, "spec", "revisionHistoryLimit") != 3 || dig[int](pod, "terminationGracePeriodSeconds") != 120 {
		t.Errorf("DaemonSet: updateStrategy %v, revisionHistoryLimit %v, terminationGracePeriodSeconds %v",
			dig[any](ds, "spec", "updateStrategy"), dig[any](ds, "spec", "revisionHistoryLimit"), pod["terminationGracePeriodSeconds"])
	}
	rp, lp := dig[map[string]any](c, "readinessProbe"), dig[map[string]any](c, "livenessProbe")
	if dig[string](rp, "httpGet", "path") != "/readyz" || dig[int](rp, "initialDelaySeconds") != 5 || dig[int](rp, "periodSeconds") != 15 ||
		dig[int](rp, "timeoutSeconds") != 3 || dig[int](rp, "successThreshold") != 2 || dig[int](rp, "failureThreshold") != 4 {
		t.Errorf("readinessProbe %v", rp)
	}
	// Helm merges the probe maps: the keys not set keep the chart's.
	if dig[string](lp, "httpGet", "path") != "/healthz" || dig[int](lp, "periodSeconds") != 60 || dig[int](lp, "failureThreshold") != 10 ||
		dig[int](lp, "timeoutSeconds") != 5 || dig[int](lp, "successThreshold") != 1 {
		t.Errorf("livenessProbe %v", lp)
	}
	var vol, mount map[string]any
	for _, v := range dig[[]any](pod, "volumes") {
		if dig[string](v, "name") == "ca-bundle" {
			vol, _ = v.(map[string]any)
		}
	}
	for _, m := range dig[[]any](c, "volumeMounts") {
		if dig[string](m, "name") == "ca-bundle" {
			mount, _ = m.(map[string]any)
		}
	}
	if dig[string](vol, "configMap", "name") != "corporate-ca" || dig[string](mount, "mountPath") != "/etc/ssl/corporate" || !dig[bool](mount, "readOnly") {
		t.Errorf("extraVolumes %v, extraVolumeMounts %v", vol, mount)
	}
	svc := objs["Service/lp-layerprobe"]
	if dig[string](svc, "spec", "type") != "NodePort" || dig[any](svc, "spec", "clusterIP") != nil ||
		dig[int](svc, "spec", "ports", 0, "port") != 19811 || dig[string](svc, "spec", "ports", 0, "targetPort") != "metrics" ||
		dig[string](svc, "metadata", "annotations", "example.com/scrape") != "false" {
		t.Errorf("Service %v, annotations %v: want NodePort 19811 with the annotation", svc["spec"], dig[any](svc, "metadata", "annotations"))
	}
	sm := objs["ServiceMonitor/lp-layerprobe"]
	if dig[string](sm, "spec", "jobLabel") != "app.kubernetes.io/name" || !slices.Equal(dig[[]any](sm, "spec", "podTargetLabels"), []any{"team"}) ||
		dig[int](sm, "spec", "sampleLimit") != 5000 || dig[int](sm, "spec", "targetLimit") != 500 ||
		!selects(stringMap(dig[map[string]any](sm, "spec", "selector", "matchLabels")), stringMap(dig[map[string]any](svc, "metadata", "labels"))) {
		t.Errorf("ServiceMonitor spec %v", sm["spec"])
	}
}

// stringMap turns a decoded label map into a map of strings.
func stringMap(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// TestHelmChartREADME: the chart's README lists every top-level value, the
// schema describes exactly the values the chart has, and the chart's
// appVersion is the VERSION file's.
func TestHelmChartREADME(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal([]byte(readFile(t, repoPath(chartPath+"/values.yaml"))), &values); err != nil {
		t.Fatal(err)
	}
	readme := readFile(t, repoPath(chartPath+"/README.md"))
	for k := range values {
		if !strings.Contains(readme, "| `"+k+"` |") {
			t.Errorf("%s/README.md does not list the value %s", chartPath, k)
		}
	}
	var schema struct {
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(readFile(t, repoPath(chartPath+"/values.schema.json"))), &schema); err != nil {
		t.Fatal(err)
	}
	if schema.AdditionalProperties == nil || *schema.AdditionalProperties {
		t.Error("values.schema.json allows unknown top-level values")
	}
	if got, want := slices.Sorted(maps.Keys(schema.Properties)), slices.Sorted(maps.Keys(values)); !slices.Equal(got, want) {
		t.Errorf("values.schema.json describes %v; values.yaml has %v", got, want)
	}
	var nested struct {
		Properties map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"properties"`
	}
	_ = json.Unmarshal([]byte(readFile(t, repoPath(chartPath+"/values.schema.json"))), &nested)
	for k, v := range values {
		m, ok := v.(map[string]any)
		props := nested.Properties[k].Properties
		if !ok || props == nil {
			continue
		}
		if got, want := slices.Sorted(maps.Keys(props)), slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
			t.Errorf("values.schema.json's %s has %v; values.yaml's %v", k, got, want)
		}
	}
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, repoPath(chartPath+"/Chart.yaml"))), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != versionFile(t) {
		t.Errorf("Chart.yaml appVersion %q, VERSION %q", chart.AppVersion, versionFile(t))
	}
}
