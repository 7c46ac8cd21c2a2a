package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// fakeAgent serves the three answers `layerprobe overhead` reads, over TLS,
// to clients that authenticate as auth says.
func fakeAgent(t *testing.T, auth func(*http.Request) bool, edit ...func(*api.Engine)) (*httptest.Server, string) {
	t.Helper()
	return fakeAgentWith(t, auth, nil, edit...)
}

// fakeAgentWith is fakeAgent with the overhead answer edited first.
func fakeAgentWith(t *testing.T, auth func(*http.Request) bool, overhead func(*api.OverheadResponse), edit ...func(*api.Engine)) (*httptest.Server, string) {
	t.Helper()
	finished := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	result := func(target measure.Target, w measure.Workload) measure.Result {
		r := measure.Result{Target: target, Workload: w, RoundsOK: 6,
			Raw: measure.Raw{IOPS: 1000, BandwidthBytes: 4 << 20, LatencyP50: 1e-4, LatencyP99: 1e-3, FsyncP99: 2e-3}}
		if target != measure.TargetHost {
			r.Overhead = map[string]measure.Overhead{measure.MetricFsyncP99: {Ratio: 0.1, CILow: 0.05, CIHigh: 0.2,
				PercentOfHost: 90.9, PercentLow: 83.3, PercentHigh: 95.2, N: 6, Coverage: 0.97}}
		}
		return r
	}
	answers := map[string]any{
		"/api/v1/overhead": api.OverheadResponse{GeneratedAt: finished, Confidence: 0.95, Engines: []api.EngineOverhead{
			{Engine: "default", Driver: "overlay2", BackingFS: "extfs", Mode: measure.ModeSteady, LastCycleID: 7, LastSuccess: &finished, Window: 48,
				Results: []measure.Result{result(measure.TargetHost, measure.Fsync), result(measure.TargetContainer, measure.Fsync)}},
			{Engine: "default", Driver: "overlay2", BackingFS: "extfs", Mode: measure.ModeCold, LastCycleID: 6, LastSuccess: &finished, Window: 12,
				Results: []measure.Result{result(measure.TargetHost, measure.Fsync), result(measure.TargetContainer, measure.Fsync)}},
		}},
		"/api/v1/engines": api.EnginesResponse{Engines: []api.Engine{{Name: "default", Endpoint: "unix:///var/run/docker.sock",
			Reachable: true, EngineFacts: measure.EngineFacts{Runtime: "docker", EngineVersion: "27.5.1", Driver: "overlay2", DriverClass: "supported",
				BackingFS: "extfs", DataRoot: "/var/lib/docker", ImageStore: "overlay2", FioVersion: "fio-3.33"}}}},
		"/api/v1/cycles": api.CyclesResponse{Cycles: []api.Cycle{
			{ID: 7, Engine: "default", Mode: measure.ModeSteady, Profile: "quick", Result: "ok", Trigger: "schedule",
				StartedAt: finished.Add(-time.Minute), FinishedAt: finished, DurationSeconds: 60, Rounds: 6, BytesWritten: 300 << 20, StopReason: "precision"},
			{ID: 6, Engine: "default", Mode: measure.ModeCold, Profile: "quick", Result: "ok", Trigger: "schedule",
				StartedAt: finished.Add(-2 * time.Minute), FinishedAt: finished.Add(-time.Minute), DurationSeconds: 50, Rounds: 3, BytesWritten: 20 << 20, StopReason: "rounds"},
		}},
	}
	for _, f := range edit {
		f(&answers["/api/v1/engines"].(api.EnginesResponse).Engines[0])
	}
	if overhead != nil {
		ov := answers["/api/v1/overhead"].(api.OverheadResponse)
		overhead(&ov)
		answers["/api/v1/overhead"] = ov
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !auth(r) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"Unauthorized"}}`))
			return
		}
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, ca
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func writeSecret(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOverheadSecuredAgentTable: with the CA and basic auth, the table shows
// what the agent knows (engine version, fio, data root, the last cycle of
// each mode), names both modes, heads the column WORKLOAD, and prints no
// empty run-document field.
func TestOverheadSecuredAgentTable(t *testing.T) {
	srv, ca := fakeAgent(t, func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		return ok && u == "prom" && p == "s3cret"
	})
	pass := writeSecret(t, "password", "s3cret\n")

	_, err := runCLI(t, "overhead", "--url", srv.URL)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without --tls.ca-file: %v, want a certificate error", err)
	}
	_, err = runCLI(t, "overhead", "--url", srv.URL, "--tls.ca-file", ca)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "--basic-auth.username") {
		t.Errorf("without credentials: %v, want a 401 naming the flags", err)
	}
	out, err := runCLI(t, "overhead", "--url", srv.URL, "--tls.ca-file", ca, "--basic-auth.username", "prom", "--basic-auth.password-file", pass)
	if err != nil {
		t.Fatalf("overhead: %v\n%s", err, out)
	}
	for _, want := range []string{
		"Agent " + srv.URL + ": latest overheads at 2026-11-28T01:00:00Z, 95% confidence intervals",
		"Engine default (unix:///var/run/docker.sock)",
		"data root /var/lib/docker",
		"engine:       Docker 27.5.1",
		"fio:          fio-3.33",
		"last steady:  cycle 7, ok at 2026-11-28T01:00:00Z, schedule, profile quick, 6 rounds (stopped by precision), 1m0s, 300.0 MiB written",
		"last cold:    cycle 6, ok",
		"Steady state (one long-lived probe container), estimated over the last 48 rounds",
		"Cold (a fresh container per round, fsync job in its first seconds), estimated over the last 12 rounds",
		"TARGET     WORKLOAD",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"layerprobe -", "profile -", "data root -", "version -", "fio:          -", " JOB ", "Engine default (-)"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
	if n := strings.Count(out, "Engine default"); n != 1 {
		t.Errorf("engine heading %d times, want once (steady and cold in one block):\n%s", n, out)
	}
}

// TestOverheadBearerTokenAndHTTPConfigFile: a bearer token from a file, and
// a Prometheus HTTP client configuration file instead of the flags.
func TestOverheadBearerTokenAndHTTPConfigFile(t *testing.T) {
	srv, ca := fakeAgent(t, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer tok-123" })
	token := writeSecret(t, "token", "tok-123\n")
	if out, err := runCLI(t, "overhead", "--url", srv.URL, "--tls.ca-file", ca, "--bearer-token-file", token, "-o", "json"); err != nil {
		t.Errorf("--bearer-token-file: %v\n%s", err, out)
	} else if !json.Valid([]byte(out)) {
		t.Errorf("-o json: not JSON:\n%s", out)
	}
	cfg := writeSecret(t, "client.yml", "tls_config:\n  ca_file: "+ca+"\nauthorization:\n  credentials_file: "+token+"\n")
	if out, err := runCLI(t, "overhead", "--url", srv.URL, "--http.config.file", cfg); err != nil || !strings.Contains(out, "WORKLOAD") {
		t.Errorf("--http.config.file: %v\n%s", err, out)
	}
	// One place for TLS and authentication: the file and a flag together
	// are a usage error, and so is half a client certificate.
	for _, args := range [][]string{
		{"--http.config.file", cfg, "--tls.ca-file", ca},
		{"--tls.cert-file", ca},
		{"--basic-auth.password-file", token},
		{"--basic-auth.username", "u", "--bearer-token-file", token},
	} {
		_, err := runCLI(t, append([]string{"overhead", "--url", srv.URL}, args...)...)
		if exitCode(err) != exitUsage {
			t.Errorf("%v: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
}

// TestOverheadHostArmOutside: an agent whose host arm could not join the
// probe container's CPU cgroups says so in /api/v1/engines, and the table
// carries the same alarm as `layerprobe run`'s.
func TestOverheadHostArmOutside(t *testing.T) {
	srv, ca := fakeAgent(t, func(*http.Request) bool { return true }, func(e *api.Engine) {
		e.HostArmCgroup, e.HostArmCgroupError = "outside", "join cgroup /sys/fs/cgroup/cpu/docker/x: read-only file system"
	})
	out, err := runCLI(t, "overhead", "--url", srv.URL, "--tls.ca-file", ca)
	if err != nil {
		t.Fatalf("overhead: %v\n%s", err, out)
	}
	if !strings.Contains(out, "!!! HOST ARM NOT IN THE PROBE CONTAINER'S CPU CGROUPS: join cgroup /sys/fs/cgroup/cpu/docker/x: read-only file system") {
		t.Errorf("no host-arm alarm:\n%s", out)
	}
}

// TestOverheadSaysWhenTheIntervalComes: a mode whose results have fewer
// rounds than an interval needs gets one line with the fewest and the
// next cycle's time; a mode with every interval gets none.
func TestOverheadSaysWhenTheIntervalComes(t *testing.T) {
	srv, ca := fakeAgentWith(t, func(*http.Request) bool { return true }, func(ov *api.OverheadResponse) {
		next := ov.GeneratedAt.Add(5 * time.Hour)
		for i := range ov.Engines {
			ov.Engines[i].IntervalRounds, ov.Engines[i].NextCycleAt = 6, &next
		}
		r := &ov.Engines[0].Results[1]
		o := r.Overhead[measure.MetricFsyncP99]
		o.N, o.Withheld = 4, true
		r.Overhead[measure.MetricFsyncP99] = o
	})
	out, err := runCLI(t, "overhead", "--url", srv.URL, "--tls.ca-file", ca)
	if err != nil {
		t.Fatalf("overhead: %v\n%s", err, out)
	}
	if !strings.Contains(out, "steady: no interval yet: 4 of 6 rounds; the next cycle at 06:00 UTC") || strings.Contains(out, "cold: no interval yet") {
		t.Errorf("want one line for the steady mode only:\n%s", out)
	}
}

// TestOverheadHelpListsTLSAndAuthFlags: `layerprobe overhead --help` names
// every TLS and authentication flag.
func TestOverheadHelpListsTLSAndAuthFlags(t *testing.T) {
	out, err := runCLI(t, "overhead", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--tls.ca-file", "--tls.cert-file", "--tls.key-file", "--tls.server-name", "--tls.insecure-skip-verify",
		"--basic-auth.username", "--basic-auth.password-file", "--bearer-token-file", "--http.config.file"} {
		if !strings.Contains(out, "      "+f+" ") {
			t.Errorf("overhead --help lacks %s:\n%s", f, out)
		}
	}
}
