package testharness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
)

// AgentFiles are the files of a `layerprobe agent` under test: its
// configuration, its API token and its state directory, in one directory
// that several agent processes in a row can share.
type AgentFiles struct {
	Dir, Config, TokenFile, StateDir string
}

// WriteAgentFiles writes configYAML and token into dir, creating dir and
// an empty state directory.
func WriteAgentFiles(dir, configYAML, token string) (AgentFiles, error) {
	f := AgentFiles{Dir: dir, Config: filepath.Join(dir, "config.yml"), TokenFile: filepath.Join(dir, "token"),
		StateDir: filepath.Join(dir, "state")}
	if err := os.MkdirAll(f.StateDir, 0o700); err != nil {
		return f, fmt.Errorf("agent files: %w", err)
	}
	if err := os.WriteFile(f.Config, []byte(configYAML), 0o600); err != nil {
		return f, fmt.Errorf("agent config: %w", err)
	}
	if err := os.WriteFile(f.TokenFile, []byte(token+"\n"), 0o600); err != nil {
		return f, fmt.Errorf("agent token: %w", err)
	}
	return f, nil
}

// MustWriteAgentFiles is WriteAgentFiles into a fresh directory of t.
func MustWriteAgentFiles(t testing.TB, configYAML, token string) AgentFiles {
	t.Helper()
	f, err := WriteAgentFiles(t.TempDir(), configYAML, token)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Args are the arguments of `layerprobe agent` with these files, listening
// on addr, followed by extra.
func (f AgentFiles) Args(addr string, extra ...string) []string {
	return append([]string{"agent", "--config", f.Config, "--web.listen-address", addr,
		"--api-token-file", f.TokenFile, "--state-dir", f.StateDir}, extra...)
}

// GetJSON fetches url and decodes its JSON body into v; an answer other
// than 200 OK is an error that quotes the body.
func GetJSON(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: decode: %w\n%s", url, err, b)
	}
	return nil
}

// API is a running agent's REST API as a test sees it: every method fails
// the test when the agent cannot be asked.
type API struct {
	Base string // http://127.0.0.1:PORT
}

var apiClient = &http.Client{Timeout: 30 * time.Second}

// GetJSON decodes the 200 OK answer to GET path into v.
func (a API) GetJSON(t testing.TB, path string, v any) {
	t.Helper()
	if err := GetJSON(context.Background(), apiClient, a.Base+path, v); err != nil {
		t.Fatal(err)
	}
}

// Cycles lists the agent's cycles, newest first.
func (a API) Cycles(t testing.TB) []api.Cycle {
	t.Helper()
	var body api.CyclesResponse
	a.GetJSON(t, "/api/v1/cycles?limit=1000", &body)
	return body.Cycles
}

// Scrape returns the agent's /metrics as it came and parsed.
func (a API) Scrape(t testing.TB) (string, Metrics) {
	t.Helper()
	raw, ms, err := Scrape(context.Background(), apiClient, a.Base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return raw, ms
}

// Docker talks to a Docker daemon's API socket directly, so that what a
// test checks on the daemon does not depend on layerprobe's own engine
// code or on a docker CLI.
type Docker struct{ c *http.Client }

// NewDocker returns a client of the daemon at host (unix://PATH).
func NewDocker(host string) *Docker {
	sock := strings.TrimPrefix(host, "unix://")
	return &Docker{c: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

// Do sends a request without body to the daemon and decodes the answer
// into v (nil: ignore it); an answer of 300 or above fails t.
func (d *Docker) Do(t testing.TB, method, path string, v any) {
	t.Helper()
	b := d.Raw(t, method, path, "", nil)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("docker %s %s: decode: %v", method, path, err)
		}
	}
}

// Container is a container as the daemon lists it.
type Container struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	State  string            `json:"State"`
	Labels map[string]string `json:"Labels"`
}

// Labelled is what the daemon holds with layerprobe's managed label.
type Labelled struct {
	Containers []Container
	Volumes    []string
	Images     []string
}

// Empty reports whether nothing of layerprobe is left.
func (l Labelled) Empty() bool { return len(l.Containers)+len(l.Volumes)+len(l.Images) == 0 }

// OwnedBy returns the containers of one owner token.
func (l Labelled) OwnedBy(owner string) []Container {
	var out []Container
	for _, c := range l.Containers {
		if c.Labels["io.layerprobe.owner"] == owner {
			out = append(out, c)
		}
	}
	return out
}

func (l Labelled) String() string {
	var names []string
	for _, c := range l.Containers {
		names = append(names, strings.Join(c.Names, ",")+"("+c.State+")")
	}
	return fmt.Sprintf("containers %v, volumes %v, images %v", names, l.Volumes, l.Images)
}

// Send is Do with a request body of the content type.
func (d *Docker) Send(t testing.TB, method, path, contentType string, body io.Reader, v any) {
	t.Helper()
	raw, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	b := d.Raw(t, method, path, contentType, raw)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("docker %s %s: decode: %v", method, path, err)
		}
	}
}

// Labelled lists the containers, volumes and images layerprobe created.
func (d *Docker) Labelled(t testing.TB) Labelled {
	t.Helper()
	filter := url.QueryEscape(`{"label":["io.layerprobe.managed"]}`)
	var l Labelled
	d.Do(t, "GET", "/containers/json?all=1&filters="+filter, &l.Containers)
	var vs struct{ Volumes []struct{ Name string } }
	d.Do(t, "GET", "/volumes?filters="+filter, &vs)
	for _, v := range vs.Volumes {
		l.Volumes = append(l.Volumes, v.Name)
	}
	var is []struct {
		ID string `json:"Id"`
	}
	d.Do(t, "GET", "/images/json?filters="+filter, &is)
	for _, i := range is {
		l.Images = append(l.Images, i.ID)
	}
	return l
}
