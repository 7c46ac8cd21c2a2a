package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// badRequest is one malformed request and what the agent must answer.
type badRequest struct {
	method, path string
	header       map[string]string
	body         string
	chunked      bool // send the body without Content-Length
	status       int
	code         string // error code of the JSON error shape; "" = a 2xx answer
	mention      string // the error message must contain this
}

// errorCodes is every code of the JSON error shape (docs/api.md).
var errorCodes = []string{"bad_parameter", "not_found", "method_not_allowed", "unauthorized", "forbidden",
	"conflict", "rate_limited", "payload_too_large", "internal", "not_ready"}

// badRequests is the table: every route with malformed parameters, wrong
// methods, oversized or malformed bodies and wrong authentication.
func badRequests() []badRequest {
	long := strings.Repeat("x", 8<<10)
	big := strings.Repeat("y", 64<<10)
	tok := bearer(testToken)
	withTok := func(h map[string]string) map[string]string {
		out := map[string]string{"Authorization": "Bearer " + testToken}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	var rs []badRequest

	// Wrong methods on every route: 405 with the JSON error.
	getRoutes := []string{"/", "/healthz", "/readyz", "/metrics", "/api/v1/overhead", "/api/v1/cycles/1",
		"/api/v1/engines", "/api/v1/openapi.yaml"}
	for _, p := range getRoutes {
		for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "FROBNICATE"} {
			rs = append(rs, badRequest{method: m, path: p, header: tok, status: 405, code: "method_not_allowed", mention: "allowed: GET"})
		}
	}
	for _, m := range []string{"PUT", "DELETE", "PATCH", "OPTIONS"} {
		rs = append(rs, badRequest{method: m, path: "/api/v1/cycles", header: tok, status: 405, code: "method_not_allowed", mention: "GET, POST"})
	}

	// Malformed, unknown and repeated query parameters.
	for q, mention := range map[string]string{
		"limit=abc": "limit", "limit=0": "limit", "limit=-1": "limit", "limit=1001": "limit", "limit=1e3": "limit",
		"limit=%2B5": "limit", "limit=": "limit", "limit=1&limit=2": "limit", "limit=" + long: "limit",
		"since=someday": "since", "since=-5h": "since", "since=0s": "since", "since=7d": "since",
		"since=2025-13-01T00:00:00Z": "since", "since=2025-01-01T00:00:00+01:00": "%2B", "since=99999999999h": "since",
		"engine=Bad!Name": "engine", "engine=": "engine", "engine=%00": "engine", "engine=../../etc": "engine",
		"engine=" + strings.Repeat("a", 64): "engine", "limt=5": "limt", "limit=5&x=%zz": "malformed",
		long + "=1": "unknown query parameter",
	} {
		rs = append(rs, badRequest{method: "GET", path: "/api/v1/cycles?" + q, status: 400, code: "bad_parameter", mention: mention})
	}
	for _, p := range []string{"/api/v1/overhead", "/api/v1/engines", "/api/v1/openapi.yaml", "/api/v1/cycles/1"} {
		rs = append(rs, badRequest{method: "GET", path: p + "?profile=seed", status: 400, code: "bad_parameter", mention: "profile"})
		rs = append(rs, badRequest{method: "GET", path: p + "?%zz", status: 400, code: "bad_parameter", mention: "malformed"})
	}
	for _, id := range []string{"abc", "0", "-1", "1.5", "0x10", "99999999999999999999", "%00", "%20", "1%0A", long} {
		rs = append(rs, badRequest{method: "GET", path: "/api/v1/cycles/" + id, status: 400, code: "bad_parameter", mention: "cycle id"})
	}
	rs = append(rs,
		badRequest{method: "GET", path: "/api/v1/cycles/999999", status: 404, code: "not_found", mention: "999999"},
		badRequest{method: "GET", path: "/api/v1/cycles/1/samples", status: 404, code: "not_found", mention: "no route"},
		badRequest{method: "GET", path: "/api/v1/cycles/", status: 404, code: "not_found", mention: "no route"},
		badRequest{method: "GET", path: "/api/v1/overhead/", status: 404, code: "not_found", mention: "no route"},
		badRequest{method: "GET", path: "/api/v2/overhead", status: 404, code: "not_found", mention: "no route"},
		badRequest{method: "GET", path: "/api/v1/../../etc/passwd", status: 404, code: "not_found", mention: "no route"},
		badRequest{method: "GET", path: "/api/v1/%2e%2e/%2e%2e/etc/passwd", status: 404, code: "not_found", mention: "no route"},
		badRequest{method: "GET", path: "/" + long, status: 404, code: "not_found", mention: "no route"},
	)
	// Routes outside /api/v1 ignore query parameters (a scrape config may
	// add some); bodies on GET routes are not read.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/"} {
		rs = append(rs, badRequest{method: "GET", path: p + "?limit=abc&%zz", status: 200})
	}
	for _, p := range getRoutes {
		if p == "/api/v1/cycles/1" {
			p = "/api/v1/cycles"
		}
		rs = append(rs, badRequest{method: "GET", path: p, body: big, header: map[string]string{"Authorization": "Bearer wrong"}, status: 200})
	}

	// POST /api/v1/cycles: authentication first, then query and body.
	for _, h := range []map[string]string{
		nil,
		{"Authorization": "Bearer wrong-token-0123456789abcdef"},
		{"Authorization": "Bearer " + testToken + "x"},
		{"Authorization": "Bearer " + testToken[:len(testToken)-1]},
		{"Authorization": "Bearer"},
		{"Authorization": "Bearer "},
		{"Authorization": "Basic ZmF1bHRzOnRva2Vu"},
		{"Authorization": testToken},
		{"Authorization": "Bearer " + long},
		{"Cookie": "token=" + testToken},
		{"X-Api-Token": testToken},
	} {
		rs = append(rs, badRequest{method: "POST", path: "/api/v1/cycles", header: h, status: 401, code: "unauthorized"})
	}
	rs = append(rs,
		badRequest{method: "POST", path: "/api/v1/cycles?token=" + testToken, status: 401, code: "unauthorized", mention: "missing"},
		badRequest{method: "POST", path: "/api/v1/cycles", body: big, status: 401, code: "unauthorized"},
		badRequest{method: "POST", path: "/api/v1/cycles", body: `{"token":"` + testToken + `"}`, status: 401, code: "unauthorized", mention: "missing"},
		badRequest{method: "POST", path: "/api/v1/cycles?profile=seed", header: tok, status: 400, code: "bad_parameter", mention: "profile"},
		badRequest{method: "POST", path: "/api/v1/cycles?%zz", header: tok, status: 400, code: "bad_parameter", mention: "malformed"},
		badRequest{method: "POST", path: "/api/v1/cycles", header: withTok(map[string]string{"Content-Type": "application/json"}),
			body: `{"profile":"seed","targets":["/"]}`, status: 400, code: "bad_parameter", mention: `"profile", "targets"`},
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: `[]`, status: 400, code: "bad_parameter", mention: "empty or {}"},
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: `{"a":`, status: 400, code: "bad_parameter", mention: "empty or {}"},
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: "profile=seed", status: 400, code: "bad_parameter", mention: "empty or {}"},
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: "\x00\xff\xfe", status: 400, code: "bad_parameter", mention: "empty or {}"},
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: strings.Repeat(" ", 1025), status: 413, code: "payload_too_large", mention: "1024 bytes"},
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: big, status: 413, code: "payload_too_large", mention: "1024 bytes"},
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: big, chunked: true, status: 413, code: "payload_too_large", mention: "1024 bytes"},
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: strings.Repeat("z", 4<<20), status: 413, code: "payload_too_large", mention: "1024 bytes"},
		// While a cycle runs, a valid trigger is refused too.
		badRequest{method: "POST", path: "/api/v1/cycles", header: tok, body: "{}", status: 409, code: "conflict", mention: "already running"},
	)
	return rs
}

// send sends one table request on its own connection.
func (r badRequest) send(t *testing.T, base string) (int, http.Header, []byte) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
		if r.chunked {
			body = io.MultiReader(body) // hides the length: chunked encoding
		}
	}
	req, err := http.NewRequest(r.method, base+r.path, body)
	must(t, err)
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if len(r.body) > 1024 {
		// As curl does for large bodies: the server can refuse the
		// request before the body is sent, instead of closing the
		// connection under a client that is still writing.
		req.Header.Set("Expect", "100-continue")
	}
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// checkErrorShape asserts the JSON error shape: exactly
// {"error": {"code": "...", "message": "..."}} with a documented code, and
// in a conflict the one documented extension, the running cycle's
// positive "cycle_id".
func checkErrorShape(h http.Header, b []byte, code string) error {
	if ct := h.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		return fmt.Errorf("Content-Type %q", ct)
	}
	var raw map[string]map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("not the JSON error shape: %v", err)
	}
	e, ok := raw["error"]
	if id, has := e["cycle_id"]; has && e["code"] == "conflict" {
		if n, isNum := id.(float64); !isNum || n < 1 {
			return fmt.Errorf("cycle_id %v: want the running cycle's id: %s", id, b)
		}
		delete(e, "cycle_id")
	}
	if len(raw) != 1 || !ok || len(e) != 2 {
		return fmt.Errorf("not the JSON error shape: %s", b)
	}
	c, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if !slices.Contains(errorCodes, c) || msg == "" {
		return fmt.Errorf("code %q message %q", c, msg)
	}
	if c != code {
		return fmt.Errorf("code %q, want %q", c, code)
	}
	return nil
}

// Every route of a real agent, called with malformed parameters, wrong
// methods, oversized and malformed bodies and wrong authentication while a
// cycle runs: each answer is the documented 4xx with the JSON error shape
// (or the documented 200 where the input is ignored), never a 5xx; the
// agent logs no error or panic and the cycle it ran meanwhile succeeds.
// Malformed HTTP that net/http refuses before any handler runs gets its
// plain-text 4xx, and the agent serves on.
func TestMalformedRequests(t *testing.T) {
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	s := newAgentSetup(t, d.Host, baseConfig)
	a := s.start(t)
	a.trigger(t, 30*time.Second)
	if c := a.newCycle(t, 0, 2*time.Minute); c.Result != "ok" {
		t.Fatalf("first cycle: %+v", c)
	}
	a.trigger(t, 30*time.Second)
	running := a.runningCycle(t, time.Minute)

	table := badRequests()
	counts := map[int]int{}
	for _, r := range table {
		if r.status == 409 {
			// Only meaningful while the cycle still runs.
			if c := a.cycles(t)[0]; c.ID != running.ID || c.Result != "running" {
				continue
			}
		}
		code, h, b := r.send(t, a.base)
		counts[code]++
		name := fmt.Sprintf("%s %s", r.method, truncate(r.path, 80))
		if code >= 500 {
			t.Errorf("%s: %d %s", name, code, truncate(string(b), 200))
			continue
		}
		if code != r.status {
			t.Errorf("%s: %d %s; want %d", name, code, truncate(string(b), 200), r.status)
			continue
		}
		if r.code == "" {
			continue
		}
		if err := checkErrorShape(h, b, r.code); err != nil {
			t.Errorf("%s: %d: %v", name, code, err)
			continue
		}
		if !strings.Contains(string(b), r.mention) && !strings.Contains(string(b), strings.ReplaceAll(r.mention, `"`, `\"`)) {
			t.Errorf("%s: message %s does not mention %q", name, truncate(string(b), 200), r.mention)
		}
		switch code {
		case 405:
			if h.Get("Allow") == "" {
				t.Errorf("%s: 405 without Allow", name)
			}
		case 401:
			if !strings.HasPrefix(h.Get("WWW-Authenticate"), `Bearer realm="layerprobe"`) {
				t.Errorf("%s: 401 with WWW-Authenticate %q", name, h.Get("WWW-Authenticate"))
			}
		}
	}
	t.Logf("%d malformed requests: answers by status %v", len(table), counts)

	// Malformed HTTP: net/http answers before the handler, in plain text.
	for _, raw := range []struct{ name, req, status string }{
		{"header over 64 KiB", "GET /api/v1/overhead HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("h", 80<<10) + "\r\n\r\n", "431"},
		{"bad Content-Length", "POST /api/v1/cycles HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", "400"},
		{"no Host", "GET /api/v1/overhead HTTP/1.1\r\n\r\n", "400"},
		{"bad request line", "GET\r\n\r\n", "400"},
		{"binary garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", "400"},
	} {
		status := rawStatus(t, a.base, raw.req)
		if !strings.HasPrefix(status, raw.status) {
			t.Errorf("%s: status line %q, want %s", raw.name, status, raw.status)
		}
	}

	if code, _ := a.get(t, "/healthz"); code != 200 {
		t.Errorf("/healthz after the table: %d", code)
	}
	if c := a.newCycle(t, running.ID-1, 2*time.Minute); c.Result != "ok" {
		t.Errorf("the cycle that ran during the table: %+v, want ok", c)
	}
	if log := a.Log.String(); strings.Contains(log, "panic") || strings.Contains(log, "level=ERROR") {
		t.Errorf("the agent logged errors:\n%s", grepLines(log, "panic", "level=ERROR"))
	}
	if code := a.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// rawStatus writes req on a new connection and returns the status code and
// reason of the answer ("" when the server closed without one).
func rawStatus(t *testing.T, base, req string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	must(t, err)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, req)
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimPrefix(strings.TrimSpace(line), "HTTP/1.1 ")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// grepLines returns the lines of s that contain any of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
