// Package thanosbed runs Thanos components (sidecar, store gateway,
// query, ruler) on 127.0.0.1 for the tests and the benchmark that put the
// shipped rules and dashboards on a distributed store. The thanos binary
// is built by scripts/build-thanos.sh, outside the product's go.mod.
package thanosbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bin is where scripts/build-thanos.sh puts the thanos binary.
const Bin = "/opt/layerprobe-test-tools/bin/thanos"

// Process is a running Thanos component.
type Process struct {
	Name       string
	HTTP, GRPC string // host:port
	LogPath    string

	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the component's HTTP base URL.
func (p *Process) URL() string { return "http://" + p.HTTP }

// Start starts a Thanos component, niced (10) like the Prometheus servers
// beside it, on 127.0.0.1, its output in dir/name.log, and waits until it
// is ready (at most two minutes). A --grpc-address among args is kept;
// otherwise it gets a free port.
func Start(ctx context.Context, bin, dir, name, component string, args ...string) (*Process, error) {
	return StartWithin(ctx, 2*time.Minute, bin, dir, name, component, args...)
}

// StartWithin is Start with another wait for readiness: a store gateway
// reads every block's index before it is ready.
func StartWithin(ctx context.Context, ready time.Duration, bin, dir, name, component string, args ...string) (*Process, error) {
	httpAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	p := &Process{Name: name, HTTP: httpAddr, LogPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	for _, a := range args {
		if g, ok := strings.CutPrefix(a, "--grpc-address="); ok {
			p.GRPC = g
		}
	}
	if p.GRPC == "" {
		if p.GRPC, err = FreeAddr(); err != nil {
			return nil, err
		}
		args = append(args, "--grpc-address="+p.GRPC)
	}
	args = append([]string{"-n", "10", bin, component, "--http-address=" + p.HTTP, "--log.level=warn"}, args...)
	logf, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command("nice", args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("thanos %s: %w", component, err)
	}
	go func() { p.cmd.Wait(); logf.Close(); close(p.done) }()
	deadline := time.Now().Add(ready)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("thanos %s exited before it was ready:\n%s", name, p.LogTail(20))
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if resp, err := http.Get(p.URL() + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("thanos %s not ready within %s:\n%s", name, ready, p.LogTail(20))
		}
	}
}

// Stop stops the component: SIGINT, then SIGKILL after 30 s.
func (p *Process) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// LogTail is the last n lines of the component's output.
func (p *Process) LogTail(n int) string {
	b, _ := os.ReadFile(p.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// EndpointConfig is Thanos Query's --endpoint.sd-config for the gRPC
// addresses given.
func EndpointConfig(addrs ...string) string {
	var b strings.Builder
	b.WriteString("endpoints:\n")
	for _, a := range addrs {
		fmt.Fprintf(&b, "  - address: %q\n", a)
	}
	return b.String()
}

// FreeAddr is a free 127.0.0.1 port, as host:port.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Endpoints are Thanos Query's healthy endpoints, counted by kind
// (sidecar, store, rule).
func Endpoints(query *Process) (map[string]int, error) {
	resp, err := http.Get(query.URL() + "/api/v1/stores")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Data map[string][]struct {
			LastError *string `json:"lastError"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s/api/v1/stores: %w", query.URL(), err)
	}
	got := map[string]int{}
	for kind, es := range r.Data {
		for _, e := range es {
			if e.LastError == nil || *e.LastError == "" {
				got[kind]++
			}
		}
	}
	return got, nil
}

// WaitEndpoints waits until Thanos Query has exactly as many healthy
// endpoints of each kind as want says, for at most timeout.
func WaitEndpoints(ctx context.Context, query *Process, want map[string]int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		got, err := Endpoints(query)
		if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
			return nil
		}
		last = fmt.Sprintf("healthy endpoints %v, want %v", got, want)
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return errors.New("Thanos Query's endpoints: " + last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// BucketConfig is an objstore configuration of a FILESYSTEM bucket in
// dir.
func BucketConfig(dir string) string {
	return fmt.Sprintf("type: FILESYSTEM\nconfig:\n  directory: %s\n", dir)
}

// AddToBucket puts a Prometheus TSDB block into a FILESYSTEM bucket as a
// sidecar would upload it: its index and chunks hard-linked (the bucket
// and the TSDB share a file system; a copy where they do not), its
// meta.json with Thanos' section (external labels, source, resolution
// 0). newID, when not empty, is the block's ID in the bucket.
func AddToBucket(block, bucket, newID string, labels map[string]string) error {
	id := filepath.Base(block)
	if newID == "" {
		newID = id
	}
	dst := filepath.Join(bucket, newID)
	if err := os.MkdirAll(filepath.Join(dst, "chunks"), 0o755); err != nil {
		return err
	}
	var files []string
	chunks, err := os.ReadDir(filepath.Join(block, "chunks"))
	if err != nil {
		return err
	}
	for _, c := range chunks {
		files = append(files, filepath.Join("chunks", c.Name()))
	}
	files = append(files, "index")
	for _, f := range files {
		if err := os.Link(filepath.Join(block, f), filepath.Join(dst, f)); err != nil {
			if out, cerr := exec.Command("cp", filepath.Join(block, f), filepath.Join(dst, f)).CombinedOutput(); cerr != nil {
				return fmt.Errorf("link or copy %s: %v; %v: %s", f, err, cerr, out)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(block, "meta.json"))
	if err != nil {
		return err
	}
	var meta map[string]any
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("%s/meta.json: %w", block, err)
	}
	meta["ulid"] = newID
	meta["thanos"] = map[string]any{"version": 1, "labels": labels, "downsample": map[string]any{"resolution": 0},
		"source": "sidecar", "segment_files": segmentNames(files)}
	out, err := json.MarshalIndent(meta, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "meta.json"), out, 0o644)
}

func segmentNames(files []string) []string {
	var out []string
	for _, f := range files {
		if s, ok := strings.CutPrefix(f, "chunks/"); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// Metric is the largest value of a metric (name, with the labels given
// matching) in a component's /metrics, or an error when it has none. The
// text format's simple lines are enough for the gauges read here.
func Metric(base, name string, labels map[string]string) (float64, error) {
	all, err := Metrics(base, name)
	if err != nil {
		return 0, err
	}
	found, best := false, 0.0
	for _, s := range all {
		ok := true
		for k, v := range labels {
			ok = ok && s.Labels[k] == v
		}
		if ok && (!found || s.Value > best) {
			found, best = true, s.Value
		}
	}
	if !found {
		return 0, fmt.Errorf("%s/metrics: no %s%v", base, name, labels)
	}
	return best, nil
}

// MetricSample is one line of a /metrics page.
type MetricSample struct {
	Labels map[string]string
	Value  float64
}

// Metrics are the samples of one metric on a component's /metrics page.
func Metrics(base, name string) ([]MetricSample, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var buf strings.Builder
	if _, err := io.Copy(&buf, resp.Body); err != nil {
		return nil, err
	}
	var out []MetricSample
	for _, line := range strings.Split(buf.String(), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		s := MetricSample{Labels: map[string]string{}}
		if rest[0] == '{' {
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				continue
			}
			for _, kv := range splitLabels(rest[1:end]) {
				k, v, _ := strings.Cut(kv, "=")
				s.Labels[k] = strings.Trim(v, `"`)
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		s.Value = v
		out = append(out, s)
	}
	return out, nil
}

// splitLabels splits a label list on the commas outside quoted values.
func splitLabels(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
