//go:build linux

package kube

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
	"github.com/layerprobe/layerprobe/internal/testsupport/testkube"
)

// The Prometheus kube-prometheus-stack would run: its name, namespace and
// the release label its monitor and rule selectors ask for (the README's
// `monitor.labels.release` and `prometheusRule.labels.release`).
const (
	promName      = "kube-prometheus-stack"
	promNamespace = "monitoring"
	promRelease   = "kube-prometheus-stack"
)

// operatorPrometheus is the Prometheus the operator runs: built from its
// module by scripts/build-prometheus-operator.sh, since Debian's lacks the
// Kubernetes service discovery every configuration of the operator's uses.
const operatorPrometheus = "/opt/layerprobe-test-tools/prometheus-v3.5.0/prometheus"

// operatorTools are the Prometheus Operator, its config reloader and the
// Prometheus it runs, built from their modules
// (scripts/build-prometheus-operator.sh, run by scripts/install-deps.sh).
func operatorTools(t *testing.T) (operator, reloader, prometheus string) {
	t.Helper()
	if fi, err := os.Stat(operatorPrometheus); err != nil || fi.Mode()&0o111 == 0 {
		testharness.SkipOrFail(t, "%s not found (scripts/install-deps.sh builds it)", operatorPrometheus)
	}
	return tool(t, "prometheus-operator", "/opt/layerprobe-test-tools/bin"),
		tool(t, "prometheus-config-reloader", "/opt/layerprobe-test-tools/bin"), operatorPrometheus
}

var promVersionRE = regexp.MustCompile(`^prometheus, version (\d+\.\d+\.\d+)`)

// prometheusImages writes the images of the Prometheus pod: Prometheus
// (the executable and any library it links) and the operator's config
// reloader, into dir, and returns their tarballs with the Prometheus
// version for the Prometheus resource's spec.version.
func prometheusImages(t *testing.T, dir, prom, reloader string) (tarballs []string, version string) {
	t.Helper()
	out, err := runCmd(time.Minute, nil, prom, "--version")
	m := promVersionRE.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("prometheus --version: %v\n%s", err, out)
	}
	version = "v" + m[1]
	files, err := testkube.ExecutableFiles(prom, "/bin/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	images := []struct {
		name  string
		files []testkube.ImageFile
		entry string
	}{
		{registry + "/prometheus:" + version, files, "/bin/prometheus"},
		{registry + "/prometheus-config-reloader:" + promOperatorVersion,
			[]testkube.ImageFile{{Path: "/bin/prometheus-config-reloader", Src: reloader, Mode: 0o755}},
			"/bin/prometheus-config-reloader"},
	}
	for i, img := range images {
		f := filepath.Join(dir, fmt.Sprintf("prometheus-image-%d.oci.tar", i))
		if err := testkube.WriteImage(f, img.name, img.files, []string{img.entry}); err != nil {
			t.Fatalf("image %s: %v", img.name, err)
		}
		tarballs = append(tarballs, f)
	}
	return tarballs, version
}

// startPrometheus runs the Prometheus Operator against the cluster (on
// the machine, as a cluster admin: an operator's pod and its RBAC are
// kube-prometheus-stack's business, not what this test checks) and
// creates the Prometheus resource kube-prometheus-stack would: monitors
// and rules of every namespace with its release label. The operator runs
// it as a StatefulSet pod of Prometheus 3.5. Prometheus reaches the
// API server with the admin's certificate (apiserverConfig): no
// kube-proxy routes the kubernetes Service here. The certificate's files
// are the Secret the resource mounts (spec.secrets): given as Secret keys
// instead, operator v0.85.0 names them in each monitor's scrape
// configuration after the monitor's namespace, not the Secret's, and
// Prometheus finds no such file. It returns the
// Prometheus pod's URL once it is ready; the cleanup deletes the resource
// and waits for its pod to go, then stops the operator.
func startPrometheus(t *testing.T, c *testkube.Cluster, operator, promVersion string) string {
	t.Helper()
	c.MustKubectl("create", "namespace", promNamespace)
	ca, cert, key := c.AdminCredentials()
	c.MustKubectl("create", "secret", "generic", "apiserver-client", "-n", promNamespace,
		"--from-file=ca.crt="+ca, "--from-file=tls.crt="+cert, "--from-file=tls.key="+key)

	c.StartProcess("prometheus-operator", operator,
		"--apiserver", c.Server, "--ca-file", ca, "--cert-file", cert, "--key-file", key,
		"--prometheus-config-reloader", registry+"/prometheus-config-reloader:"+promOperatorVersion,
		"--web.listen-address", fmt.Sprintf("127.0.0.1:%d", testharness.MustFreePort(t)),
		"--log-level", "info")

	resource := fmt.Sprintf(`apiVersion: monitoring.coreos.com/v1
kind: Prometheus
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  image: %[3]s/prometheus:%[4]s
  version: %[4]s
  replicas: 1
  scrapeInterval: 15s
  evaluationInterval: 15s
  podMonitorSelector: {matchLabels: {release: %[5]s}}
  podMonitorNamespaceSelector: {}
  serviceMonitorSelector: {matchLabels: {release: %[5]s}}
  serviceMonitorNamespaceSelector: {}
  ruleSelector: {matchLabels: {release: %[5]s}}
  ruleNamespaceSelector: {}
  secrets: [apiserver-client]
  apiserverConfig:
    host: %[6]s
    tlsConfig:
      caFile: /etc/prometheus/secrets/apiserver-client/ca.crt
      certFile: /etc/prometheus/secrets/apiserver-client/tls.crt
      keyFile: /etc/prometheus/secrets/apiserver-client/tls.key
`, promName, promNamespace, registry, promVersion, promRelease, c.Server)
	file := filepath.Join(c.Dir, "prometheus.yaml")
	if err := os.WriteFile(file, []byte(resource), 0o600); err != nil {
		t.Fatal(err)
	}
	c.MustKubectl("apply", "-f", file)
	// Registered after the operator's stop, so it runs before it: the
	// operator removes the StatefulSet, the kubelet its pod.
	t.Cleanup(func() {
		if _, err := c.Kubectl(time.Minute, "delete", "prometheus", "-n", promNamespace, promName, "--wait"); err != nil {
			t.Errorf("delete the Prometheus resource: %v", err)
			return
		}
		testharness.Eventually(t, 3*time.Minute, 2*time.Second, "the Prometheus pod gone", func() (bool, string) {
			out, err := c.Kubectl(time.Minute, "get", "pods", "-n", promNamespace, "-o", "name")
			return err == nil && strings.TrimSpace(out) == "", out
		})
	})

	podName := "prometheus-" + promName + "-0"
	// Registered after the resource's deletion, so it runs before it.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, args := range [][]string{
			{"describe", "pod", "-n", promNamespace, podName},
			{"logs", "-n", promNamespace, podName, "-c", "prometheus", "--tail", "30"},
			{"logs", "-n", promNamespace, podName, "-c", "config-reloader", "--tail", "30"},
		} {
			out, err := c.Kubectl(time.Minute, args...)
			t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, testharness.Tail(out, 60))
		}
	})
	var ip string
	testharness.Eventually(t, 10*time.Minute, 2*time.Second, "the operator's Prometheus pod Running and Ready", func() (bool, string) {
		c.CheckProcesses()
		out, err := c.Kubectl(time.Minute, "get", "pod", "-n", promNamespace, podName, "-o",
			`jsonpath={.status.phase} {.status.conditions[?(@.type=="Ready")].status} {.status.podIP}`)
		if err != nil {
			return false, err.Error()
		}
		f := strings.Fields(out)
		if len(f) != 3 || f[0] != "Running" || f[1] != "True" {
			return false, out
		}
		ip = f[2]
		return true, ""
	})
	return "http://" + ip + ":9090"
}

// promTarget is a target of Prometheus' /api/v1/targets.
type promTarget struct {
	ScrapePool string            `json:"scrapePool"`
	Labels     map[string]string `json:"labels"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
}

// promGet reads a Prometheus API answer's data into v.
func promGet(base, path string, query url.Values, v any) error {
	u := base + path
	if query != nil {
		u += "?" + query.Encode()
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var answer struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		return fmt.Errorf("GET %s: %s: %w: %s", u, resp.Status, err, testharness.Tail(string(b), 5))
	}
	if answer.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, answer.Error)
	}
	return json.Unmarshal(answer.Data, v)
}

// waitScraped waits until Prometheus scrapes the agent in the scrape pool
// of the monitor kind (PodMonitor or ServiceMonitor) the chart made, and
// no pool of the other kind remains, with instance the node's name and
// job jobName; then the agent's series are in Prometheus under them.
func waitScraped(t *testing.T, prom, kind, jobName string) {
	t.Helper()
	pool := map[string]string{"PodMonitor": "podMonitor", "ServiceMonitor": "serviceMonitor"}[kind] + "/layerprobe/layerprobe/0"
	testharness.Eventually(t, 10*time.Minute, 3*time.Second, "the agent's target up in "+pool, func() (bool, string) {
		var targets struct {
			ActiveTargets []promTarget `json:"activeTargets"`
		}
		if err := promGet(prom, "/api/v1/targets", nil, &targets); err != nil {
			return false, err.Error()
		}
		ok := false
		for _, tg := range targets.ActiveTargets {
			if tg.ScrapePool != pool {
				if strings.Contains(tg.ScrapePool, "/layerprobe/") {
					return false, fmt.Sprintf("a target of another monitor remains: %+v", tg)
				}
				continue
			}
			if tg.Health != "up" || tg.Labels["instance"] != testkube.NodeName || tg.Labels["job"] != jobName {
				return false, fmt.Sprintf("%+v", tg)
			}
			ok = true
		}
		return ok, fmt.Sprintf("%+v", targets.ActiveTargets)
	})
	testharness.Eventually(t, 2*time.Minute, 3*time.Second, "the agent's series in Prometheus", func() (bool, string) {
		var res struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		}
		q := url.Values{"query": {fmt.Sprintf(`layerprobe_build_info{instance=%q,job=%q}`, testkube.NodeName, jobName)}}
		if err := promGet(prom, "/api/v1/query", q, &res); err != nil {
			return false, err.Error()
		}
		return len(res.Result) == 1, fmt.Sprintf("%+v", res.Result)
	})
	t.Logf("Prometheus scrapes the agent through the %s (job %q, instance %q)", kind, jobName, testkube.NodeName)
}

// checkRulesLoaded checks that Prometheus loaded every group of the
// chart's PrometheusRule, and that no rule fails to evaluate.
func checkRulesLoaded(t *testing.T, c *testkube.Cluster, prom string) {
	t.Helper()
	out := c.MustKubectl("get", "prometheusrule", "-n", "layerprobe", "layerprobe", "-o", "json")
	var pr struct {
		Spec struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("the PrometheusRule: %v", err)
	}
	want := map[string]int{}
	for _, g := range pr.Spec.Groups {
		want[g.Name] = len(g.Rules)
	}
	if len(want) == 0 {
		t.Fatalf("the chart's PrometheusRule has no groups:\n%s", out)
	}
	testharness.Eventually(t, 10*time.Minute, 3*time.Second, "the PrometheusRule's groups loaded by Prometheus", func() (bool, string) {
		var rules struct {
			Groups []struct {
				Name  string `json:"name"`
				File  string `json:"file"`
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := promGet(prom, "/api/v1/rules", nil, &rules); err != nil {
			return false, err.Error()
		}
		got := map[string]int{}
		for _, g := range rules.Groups {
			// The operator's rule file of the PrometheusRule
			// layerprobe/layerprobe.
			if !strings.Contains(g.File, "layerprobe-layerprobe") {
				continue
			}
			got[g.Name] = len(g.Rules)
			for _, r := range g.Rules {
				if r.Health == "err" {
					t.Errorf("rule %s of group %s: %s", r.Name, g.Name, r.LastError)
				}
			}
		}
		var missing []string
		for name, n := range want {
			if got[name] != n {
				missing = append(missing, fmt.Sprintf("%s (%d of %d rules)", name, got[name], n))
			}
		}
		slices.Sort(missing)
		return len(missing) == 0, "missing: " + strings.Join(missing, ", ")
	})
	t.Logf("Prometheus loaded the PrometheusRule's %d groups", len(want))
}

// checkDashboards checks that every dashboard of the chart is a ConfigMap
// with the Grafana sidecar's label (grafana_dashboard: "1", the chart's
// default and kube-prometheus-stack's).
func checkDashboards(t *testing.T, c *testkube.Cluster) {
	t.Helper()
	want, err := filepath.Glob(repoPath("deploy/helm/layerprobe/files/dashboards/*.json"))
	if err != nil || len(want) == 0 {
		t.Fatalf("the chart's dashboards: %v %v", want, err)
	}
	out := c.MustKubectl("get", "configmap", "-n", "layerprobe", "-l", "grafana_dashboard=1", "-o", "json")
	var cms struct {
		Items []struct {
			Data map[string]string `json:"data"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &cms); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, cm := range cms.Items {
		for k, v := range cm.Data {
			var d struct {
				UID string `json:"uid"`
			}
			if err := json.Unmarshal([]byte(v), &d); err != nil || d.UID == "" {
				t.Errorf("dashboard %s in its ConfigMap: not a dashboard's JSON (%v)", k, err)
			}
			got[k] = true
		}
	}
	for _, f := range want {
		if !got[filepath.Base(f)] {
			t.Errorf("dashboard %s: no ConfigMap with the label grafana_dashboard=1 holds it (have %v)", filepath.Base(f), got)
		}
	}
}
