package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// testServer is a handler over a fake source, with the log captured.
type testServer struct {
	h   http.Handler
	src *fakeSource
	log *testharness.Buffer // slog handlers write from request goroutines
}

func newTestServer(t *testing.T, mod func(*Options)) *testServer {
	t.Helper()
	ts := &testServer{src: newFakeSource(), log: &testharness.Buffer{}}
	logger := slog.New(slog.NewTextHandler(ts.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o := Options{Source: ts.src, Metrics: metricsHandler, Logger: logger, APIToken: []byte(testToken)}
	if mod != nil {
		mod(&o)
	}
	ts.h = newHandler(o, func() time.Time { return t0 })
	return ts
}

func (ts *testServer) logText() string { return ts.log.String() }

func (ts *testServer) do(method, target string, header map[string]string, body string) *httptest.ResponseRecorder {
	c := apiCase{method: method, target: target, header: header, body: body}
	rec := httptest.NewRecorder()
	ts.h.ServeHTTP(rec, c.request())
	return rec
}

// TestBadInputIsA4xx: malformed parameters, unknown parameters, wrong
// methods and bodies on every route answer a 4xx with the JSON error shape
// and a message that names what was wrong.
func TestBadInputIsA4xx(t *testing.T) {
	ts := newTestServer(t, nil)
	long := strings.Repeat("x", 5000)
	for _, c := range []struct {
		method, target string
		header         map[string]string
		body           string
		status         int
		code           string
		mention        []string // substrings the message must hold
	}{
		{"GET", "/api/v1/cycles?limit=", nil, "", 400, codeBadParameter, []string{`"limit"`, "1 to 1000"}},
		{"GET", "/api/v1/cycles?limit=-1", nil, "", 400, codeBadParameter, []string{`"limit"`}},
		{"GET", "/api/v1/cycles?limit=%2B5", nil, "", 400, codeBadParameter, []string{`"limit"`, `"+5"`}},
		{"GET", "/api/v1/cycles?limit=1.5", nil, "", 400, codeBadParameter, []string{`"limit"`}},
		{"GET", "/api/v1/cycles?limit=1e3", nil, "", 400, codeBadParameter, []string{`"limit"`}},
		{"GET", "/api/v1/cycles?limit=99999999999999999999999", nil, "", 400, codeBadParameter, []string{`"limit"`}},
		{"GET", "/api/v1/cycles?limit=1&limit=2", nil, "", 400, codeBadParameter, []string{`"limit"`, "2 times"}},
		{"GET", "/api/v1/cycles?since=", nil, "", 400, codeBadParameter, []string{`"since"`, "RFC 3339"}},
		{"GET", "/api/v1/cycles?since=-1h", nil, "", 400, codeBadParameter, []string{`"since"`, "positive"}},
		{"GET", "/api/v1/cycles?since=0s", nil, "", 400, codeBadParameter, []string{`"since"`, "positive"}},
		{"GET", "/api/v1/cycles?since=7d", nil, "", 400, codeBadParameter, []string{`"since"`, "168h"}},
		{"GET", "/api/v1/cycles?since=2025-03-01T10:00:00+01:00", nil, "", 400, codeBadParameter, []string{`"since"`, "%2B"}},
		{"GET", "/api/v1/cycles?since=2025-13-01T00:00:00Z", nil, "", 400, codeBadParameter, []string{`"since"`}},
		{"GET", "/api/v1/cycles?since=" + long, nil, "", 400, codeBadParameter, []string{`"since"`, `"...`}},
		{"GET", "/api/v1/cycles?engine=", nil, "", 400, codeBadParameter, []string{`"engine"`}},
		{"GET", "/api/v1/cycles?engine=Default", nil, "", 400, codeBadParameter, []string{`"engine"`, "a-z0-9"}},
		{"GET", "/api/v1/cycles?engine=-x", nil, "", 400, codeBadParameter, []string{`"engine"`}},
		{"GET", "/api/v1/cycles?engine=../../etc", nil, "", 400, codeBadParameter, []string{`"engine"`}},
		{"GET", "/api/v1/cycles?engine=" + strings.Repeat("a", 64), nil, "", 400, codeBadParameter, []string{`"engine"`}},
		{"GET", "/api/v1/cycles?limt=5&foo=1", nil, "", 400, codeBadParameter, []string{`"foo"`, `"limt"`, "accepts: limit, since, engine"}},
		{"GET", "/api/v1/cycles?%zz", nil, "", 400, codeBadParameter, []string{"malformed query"}},
		{"GET", "/api/v1/cycles?a=1;b=2", nil, "", 400, codeBadParameter, []string{"malformed query"}},
		{"GET", "/api/v1/overhead?x", nil, "", 400, codeBadParameter, []string{`"x"`, "accepts: mode"}},
		{"GET", "/api/v1/overhead?mode=warm", nil, "", 400, codeBadParameter, []string{`"mode"`, "steady or cold"}},
		{"GET", "/api/v1/overhead?mode=cold&mode=steady", nil, "", 400, codeBadParameter, []string{`"mode"`, "2 times"}},
		{"GET", "/api/v1/engines?engine=default", nil, "", 400, codeBadParameter, []string{`"engine"`}},
		{"GET", "/api/v1/openapi.yaml?v=3", nil, "", 400, codeBadParameter, []string{`"v"`}},
		{"GET", "/api/v1/cycles/-1", nil, "", 400, codeBadParameter, []string{"cycle id", `"-1"`, "positive integer"}},
		{"GET", "/api/v1/cycles/%2B1", nil, "", 400, codeBadParameter, []string{"cycle id"}},
		{"GET", "/api/v1/cycles/1.0", nil, "", 400, codeBadParameter, []string{"cycle id"}},
		{"GET", "/api/v1/cycles/%20", nil, "", 400, codeBadParameter, []string{"cycle id"}},
		{"GET", "/api/v1/cycles/1/samples", nil, "", 404, codeNotFound, []string{"/api/v1/cycles/1/samples"}},
		{"GET", "/api/v1/cycles/12345", nil, "", 404, codeNotFound, []string{"12345"}},
		{"GET", "/nope", nil, "", 404, codeNotFound, []string{`"/nope"`}},
		{"HEAD", "/api/v1/overhead", nil, "", 405, codeMethodNotAllowed, nil},
		{"PATCH", "/api/v1/cycles", nil, "", 405, codeMethodNotAllowed, []string{"PATCH", "GET, POST"}},
		{"POST", "/api/v1/engines", nil, "{}", 405, codeMethodNotAllowed, []string{"allowed: GET"}},
		{"DELETE", "/api/v1/cycles/42", nil, "", 405, codeMethodNotAllowed, []string{"allowed: GET"}},
		{"OPTIONS", "/metrics", nil, "", 405, codeMethodNotAllowed, nil},
		{"POST", "/api/v1/cycles", bearer(testToken), "null", 400, codeBadParameter, []string{"empty or {}"}},
		{"POST", "/api/v1/cycles", bearer(testToken), "[]", 400, codeBadParameter, []string{"empty or {}"}},
		{"POST", "/api/v1/cycles", bearer(testToken), "{} {}", 400, codeBadParameter, []string{"empty or {}"}},
		{"POST", "/api/v1/cycles", bearer(testToken), `{"engine":"default","fio_options":"--exec_prerun=sh"}`, 400, codeBadParameter,
			[]string{`"engine"`, `"fio_options"`, "takes no body fields"}},
		{"POST", "/api/v1/cycles", bearer(testToken), strings.Repeat(" ", MaxBodyBytes) + "{}", 413, codePayloadTooLarge, []string{"1024 bytes"}},
		{"POST", "/api/v1/cycles?token=" + testToken, nil, "", 401, codeUnauthorized, []string{"Authorization: Bearer"}},
		{"POST", "/api/v1/cycles", map[string]string{"Authorization": "Bearer"}, "", 401, codeUnauthorized, nil},
		{"POST", "/api/v1/cycles", map[string]string{"Authorization": "Bearer "}, "", 401, codeUnauthorized, nil},
		{"POST", "/api/v1/cycles", map[string]string{"Authorization": testToken}, "", 401, codeUnauthorized, nil},
		{"POST", "/api/v1/cycles", bearer(testToken + "x"), "", 401, codeUnauthorized, []string{"wrong bearer token"}},
		{"POST", "/api/v1/cycles", bearer(testToken[:len(testToken)-1]), "", 401, codeUnauthorized, nil},
	} {
		t.Run(c.method+" "+truncate(c.target, 60), func(t *testing.T) {
			rec := ts.do(c.method, c.target, c.header, c.body)
			if rec.Code != c.status {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, c.status, rec.Body)
			}
			checkCommonHeaders(t, rec)
			if c.method == "HEAD" {
				return // no body to a HEAD
			}
			e := mustError(t, rec)
			if e.Error.Code != c.code {
				t.Errorf("code = %q, want %q", e.Error.Code, c.code)
			}
			for _, m := range c.mention {
				if !strings.Contains(e.Error.Message, m) {
					t.Errorf("message %q does not mention %q", e.Error.Message, m)
				}
			}
			if len(e.Error.Message) > 600 {
				t.Errorf("message is %d bytes long; client input must be cut short", len(e.Error.Message))
			}
			if c.status == 405 && rec.Header().Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			if c.status == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 with WWW-Authenticate %q, want a Bearer challenge", rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
	if n := ts.src.triggered; n != 0 {
		t.Errorf("refused requests started %d cycles", n)
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func TestAllowHeader(t *testing.T) {
	ts := newTestServer(t, nil)
	for target, want := range map[string]string{"/api/v1/cycles": "GET, POST", "/healthz": "GET", "/api/v1/cycles/3": "GET"} {
		rec := ts.do("PUT", target, nil, "")
		if got := rec.Header().Get("Allow"); got != want {
			t.Errorf("PUT %s: Allow = %q, want %q", target, got, want)
		}
	}
}

func TestTriggerDisabledSaysHowToEnable(t *testing.T) {
	for _, tok := range [][]byte{nil, {}, []byte(" \n")} {
		ts := newTestServer(t, func(o *Options) { o.APIToken = tok })
		rec := ts.do("POST", "/api/v1/cycles", bearer(testToken), "")
		if rec.Code != http.StatusForbidden {
			t.Fatalf("token %q: status = %d, want 403", tok, rec.Code)
		}
		if e := mustError(t, rec); !strings.Contains(e.Error.Message, "--api-token-file") {
			t.Errorf("403 message %q does not mention --api-token-file", e.Error.Message)
		}
		// An empty token must never match an empty bearer.
		if rec := ts.do("POST", "/api/v1/cycles", map[string]string{"Authorization": "Bearer "}, ""); rec.Code != http.StatusForbidden {
			t.Errorf("empty bearer with token %q: status %d, want 403", tok, rec.Code)
		}
	}
}

func TestTrigger(t *testing.T) {
	ts := newTestServer(t, func(o *Options) {
		// The token as read from a file, with its trailing newline.
		o.APIToken = []byte(testToken + "\n")
		o.TriggerBurst, o.TriggerLimit = 2, rate.Every(time.Hour)
	})
	post := func(h map[string]string) *httptest.ResponseRecorder { return ts.do("POST", "/api/v1/cycles", h, "") }

	// Unauthenticated attempts must not eat the operator's budget.
	for range 5 {
		if rec := post(bearer("guess")); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token: status %d, want 401", rec.Code)
		}
	}
	if rec := post(nil); rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no token: status %d, WWW-Authenticate %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}

	rec := post(map[string]string{"Authorization": "bearer " + testToken}) // scheme is case-insensitive
	if rec.Code != http.StatusAccepted {
		t.Fatalf("right token: status %d, want 202; body %s", rec.Code, rec.Body)
	}
	var tr api.TriggerResponse
	mustJSON(t, rec, &tr)
	if tr.Status != "accepted" || strings.Join(tr.Engines, ",") != "default,btrfs-lab" || tr.CycleID != 110 ||
		len(tr.CycleIDs) != 2 || tr.CycleIDs[0] != 110 || tr.CycleIDs[1] != 111 {
		t.Errorf("202 body = %+v; want the started cycles 110 and 111", tr)
	}
	if loc := rec.Header().Get("Location"); loc != "/api/v1/cycles/110" {
		t.Errorf("202 Location = %q, want /api/v1/cycles/110", loc)
	}

	// A 409 while busy names the running cycle, and does not use up the
	// budget either.
	ts.src.mu.Lock()
	ts.src.busy = true
	ts.src.mu.Unlock()
	for range 3 {
		rec := post(bearer(testToken))
		if rec.Code != http.StatusConflict {
			t.Fatalf("busy: status %d, want 409", rec.Code)
		}
		var er api.ErrorResponse
		mustJSON(t, rec, &er)
		if er.Error.Code != codeConflict || er.Error.CycleID != fakeRunningID || !strings.Contains(er.Error.Message, "already running (cycle 43)") {
			t.Errorf("409 body = %+v; want conflict naming cycle %d", er, fakeRunningID)
		}
	}
	ts.src.mu.Lock()
	ts.src.busy = false
	ts.src.mu.Unlock()

	if rec := post(bearer(testToken)); rec.Code != http.StatusAccepted {
		t.Fatalf("second trigger (burst 2): status %d, want 202; body %s", rec.Code, rec.Body)
	}
	rec = post(bearer(testToken))
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("third trigger: status %d, want 429", rec.Code)
	}
	if n := retryAfter(t, rec); n < 3000 || n > 3600 {
		t.Errorf("429 Retry-After = %d s, want about an hour", n)
	}
	if ts.src.triggered != 2 {
		t.Errorf("cycles started = %d, want 2", ts.src.triggered)
	}

	logs := ts.logText()
	if strings.Contains(logs, testToken) || strings.Contains(logs, "guess") {
		t.Errorf("the log shows a bearer token:\n%s", logs)
	}
	if !strings.Contains(logs, "wrong bearer token") {
		t.Errorf("failed authentication is not logged:\n%s", logs)
	}
	if !strings.Contains(logs, "measurement cycle triggered over the API") {
		t.Errorf("a triggered cycle is not logged:\n%s", logs)
	}
}

func TestDefaultRateLimit(t *testing.T) {
	ts := newTestServer(t, nil)
	for i := range DefaultTriggerBurst {
		if rec := ts.do("POST", "/api/v1/cycles", bearer(testToken), ""); rec.Code != http.StatusAccepted {
			t.Fatalf("trigger %d: status %d, want 202", i+1, rec.Code)
		}
	}
	rec := ts.do("POST", "/api/v1/cycles", bearer(testToken), "")
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("trigger %d: status %d, want 429", DefaultTriggerBurst+1, rec.Code)
	}
	if n := retryAfter(t, rec); n < 1 || n > 10 {
		t.Errorf("Retry-After = %d s, want 1..10", n)
	}
	if e := mustError(t, rec); !strings.Contains(e.Error.Message, "at most 3 in a row, then one every 10s") {
		t.Errorf("429 message %q does not state the limit", e.Error.Message)
	}
}

func retryAfter(t *testing.T, rec *httptest.ResponseRecorder) int {
	t.Helper()
	n, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	if err != nil {
		t.Fatalf("Retry-After %q: %v", rec.Header().Get("Retry-After"), err)
	}
	return n
}

func TestCyclesQuery(t *testing.T) {
	ts := newTestServer(t, nil)
	get := func(target string) api.CyclesResponse {
		t.Helper()
		rec := ts.do("GET", target, nil, "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
		var r api.CyclesResponse
		mustJSON(t, rec, &r)
		return r
	}
	ids := func(r api.CyclesResponse) string {
		var s []string
		for _, c := range r.Cycles {
			s = append(s, fmt.Sprint(c.ID))
		}
		return strings.Join(s, ",")
	}

	if got := ids(get("/api/v1/cycles")); got != "43,42,41,7" {
		t.Errorf("all cycles = %s", got)
	}
	if q := ts.src.lastQuery; q != (CycleQuery{Limit: DefaultLimit}) {
		t.Errorf("default query = %+v", q)
	}
	// The fake ignores the limit: the handler enforces it.
	if got := ids(get("/api/v1/cycles?limit=2")); got != "43,42" {
		t.Errorf("limit=2: %s", got)
	}
	if got := ids(get("/api/v1/cycles?since=24h&engine=default")); got != "42,41" {
		t.Errorf("since=24h&engine=default: %s", got)
	}
	if q := ts.src.lastQuery; !q.Since.Equal(t0.Add(-24*time.Hour)) || q.Engine != "default" {
		t.Errorf("query = %+v, want since %v", q, t0.Add(-24*time.Hour))
	}
	get("/api/v1/cycles?since=2025-03-01T13:00:00%2B01:00&limit=1000")
	if q := ts.src.lastQuery; !q.Since.Equal(t0) || q.Limit != 1000 {
		t.Errorf("query = %+v, want since %v, limit 1000", q, t0)
	}
	if got := ids(get("/api/v1/cycles?engine=unknown")); got != "" {
		t.Errorf("unknown engine: %q", got)
	}
	// A list is [], never null.
	if rec := ts.do("GET", "/api/v1/cycles?engine=unknown", nil, ""); !strings.Contains(rec.Body.String(), `"cycles":[]`) {
		t.Errorf("empty list written as %s", rec.Body)
	}
}

// TestNaNAndNilOnTheWire: figures Go holds as NaN are null, and absent
// lists are [] — without touching the Source's own values, which it may
// share between concurrent requests.
func TestNaNAndNilOnTheWire(t *testing.T) {
	ts := newTestServer(t, nil)
	body := ts.do("GET", "/api/v1/overhead", nil, "").Body.String()
	for _, want := range []string{`"ratio":null`, `"fsync_p99_seconds":null`, `"rounds":0`, `"results":[]`, `"last_success":null`, `"reason":"no_space"`} {
		if !strings.Contains(body, want) {
			t.Errorf("overhead lacks %s", want)
		}
	}
	body = ts.do("GET", "/api/v1/engines", nil, "").Body.String()
	for _, want := range []string{`"warnings":[]`, `"fsync_regression":{}`, `"last_cycle":null`, `"fsync_regression":{"bind":false,"container":true,"volume":false}`, `"detector":{}`, `"phase":"regressed"`} {
		if !strings.Contains(body, want) {
			t.Errorf("engines lacks %s: %s", want, body)
		}
	}
	body = ts.do("GET", "/api/v1/cycles/42", nil, "").Body.String()
	for _, want := range []string{`"latency_p99_9_seconds":null`, `"error":{"reason":"timeout"`, `"finished_at":"2025-03-01T11:50:00Z"`} {
		if !strings.Contains(body, want) {
			t.Errorf("cycle 42 lacks %s", want)
		}
	}
	body = ts.do("GET", "/api/v1/cycles/41", nil, "").Body.String()
	if !strings.Contains(body, `"samples":[]`) || !strings.Contains(body, `"results":[]`) {
		t.Errorf("cycle 41 lists: %s", body)
	}
	if ts.src.engines[1].Warnings != nil || ts.src.engines[1].FsyncRegression != nil || ts.src.overhead.Engines[1].Results != nil {
		t.Error("the handler modified the Source's values")
	}
}

func TestSourceErrorsAreLoggedNotShown(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.src.err = errors.New("open /var/lib/layerprobe/state.db: permission denied")
	for _, target := range []string{"/api/v1/overhead", "/api/v1/cycles", "/api/v1/cycles/42", "/api/v1/engines"} {
		rec := ts.do("GET", target, nil, "")
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("GET %s: %d, want 500", target, rec.Code)
		}
		if strings.Contains(rec.Body.String(), "state.db") {
			t.Errorf("GET %s leaks the internal error: %s", target, rec.Body)
		}
	}
	if !strings.Contains(ts.logText(), "state.db: permission denied") {
		t.Errorf("internal error not logged:\n%s", ts.logText())
	}
}

func TestPanicIsRecovered(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.src.panicWith = "secret panic value"
	rec := ts.do("GET", "/api/v1/engines", nil, "")
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	if e := mustError(t, rec); e.Error.Code != codeInternal || strings.Contains(e.Error.Message, "secret") {
		t.Errorf("500 body = %+v", e)
	}
	logs := ts.logText()
	if !strings.Contains(logs, "panic in HTTP handler") || !strings.Contains(logs, "secret panic value") {
		t.Errorf("panic not logged:\n%s", logs)
	}
	// The server keeps serving.
	ts.src.panicWith = ""
	if rec := ts.do("GET", "/api/v1/engines", nil, ""); rec.Code != http.StatusOK {
		t.Errorf("after a panic: status %d", rec.Code)
	}
}

func TestAbortHandlerPanicPropagates(t *testing.T) {
	h := New(Options{Source: newFakeSource(), Metrics: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	})})
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler passed on to net/http", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	t.Error("ServeHTTP returned normally")
}

func TestRequestLog(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.do("GET", "/api/v1/cycles/42", nil, "")
	logs := ts.logText()
	for _, want := range []string{"level=DEBUG", `msg="http request"`, "method=GET", "route=/api/v1/cycles/:id", "status=200", "duration_seconds="} {
		if !strings.Contains(logs, want) {
			t.Errorf("request log lacks %s:\n%s", want, logs)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	// nil Logger and nil Metrics are allowed; /metrics is then unrouted.
	h := New(Options{Source: newFakeSource()})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /metrics without a Metrics handler: %d, want 404", rec.Code)
	}

	defer func() {
		if recover() == nil {
			t.Error("New with a nil Source did not panic")
		}
	}()
	New(Options{})
}

// TestConcurrentRequests runs under -race: the handler shares one Source
// and one limiter between requests.
func TestConcurrentRequests(t *testing.T) {
	ts := newTestServer(t, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, target := range []string{"/api/v1/engines", "/api/v1/overhead", "/api/v1/cycles?limit=1", "/readyz"} {
				if rec := ts.do("GET", target, nil, ""); rec.Code != http.StatusOK {
					t.Errorf("GET %s: %d", target, rec.Code)
				}
			}
			ts.do("POST", "/api/v1/cycles", bearer(testToken), "")
		})
	}
	wg.Wait()
	if ts.src.triggered != DefaultTriggerBurst {
		t.Errorf("concurrent triggers started %d cycles, want the burst %d", ts.src.triggered, DefaultTriggerBurst)
	}
}

// TestBodyOfUnknownLength: a chunked body (no Content-Length) is cut at
// MaxBodyBytes too.
func TestBodyOfUnknownLength(t *testing.T) {
	ts := newTestServer(t, nil)
	req := httptest.NewRequest("POST", "/api/v1/cycles", strings.NewReader(strings.Repeat(" ", 4*MaxBodyBytes)+"{}"))
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+testToken)
	rec := httptest.NewRecorder()
	ts.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413; body %s", rec.Code, rec.Body)
	}
	if e := mustError(t, rec); e.Error.Code != codePayloadTooLarge {
		t.Errorf("code %q", e.Error.Code)
	}
}

// TestUnencodableAnswer: a NaN where the wire type has a plain float64 is
// a clean 500 with the error shape, not a truncated 200.
func TestUnencodableAnswer(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.src.cycles[0].DurationSeconds = math.NaN()
	rec := ts.do("GET", "/api/v1/cycles", nil, "")
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	if e := mustError(t, rec); e.Error.Code != codeInternal {
		t.Errorf("code %q", e.Error.Code)
	}
	if !strings.Contains(ts.logText(), "encode response") {
		t.Errorf("encoding failure not logged:\n%s", ts.logText())
	}
}

// TestClientGone: a Source that stops because the client went away is not
// an agent error: no 5xx, nothing logged above debug.
func TestClientGone(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.src.err = fmt.Errorf("query store: %w", context.Canceled)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rec := httptest.NewRecorder()
	ts.h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/engines", nil).WithContext(ctx))
	if rec.Code != 499 {
		t.Errorf("status %d, want 499", rec.Code)
	}
	if logs := ts.logText(); strings.Contains(logs, "level=ERROR") {
		t.Errorf("a client going away is logged as an error:\n%s", logs)
	}
}

// mode=cold starts a cold cycle through its own Source method, a bad mode
// starts nothing, and GET /api/v1/overhead?mode= filters the entries.
func TestModeParameter(t *testing.T) {
	ts := newTestServer(t, nil)
	if rec := ts.do("POST", "/api/v1/cycles?mode=warm", bearer(testToken), ""); rec.Code != http.StatusBadRequest {
		t.Fatalf("mode=warm: status %d, want 400", rec.Code)
	}
	if ts.src.triggered != 0 {
		t.Fatalf("a refused trigger started %d cycles", ts.src.triggered)
	}
	if rec := ts.do("POST", "/api/v1/cycles?mode=cold", bearer(testToken), ""); rec.Code != http.StatusAccepted {
		t.Fatalf("mode=cold: status %d, want 202; body %s", rec.Code, rec.Body)
	}
	if ts.src.triggered != 1 || ts.src.triggeredCold != 1 {
		t.Errorf("mode=cold started %d cycles, %d cold; want 1, 1", ts.src.triggered, ts.src.triggeredCold)
	}
	if rec := ts.do("POST", "/api/v1/cycles", bearer(testToken), ""); rec.Code != http.StatusAccepted {
		t.Fatalf("no mode: status %d, want 202", rec.Code)
	}
	if ts.src.triggeredCold != 1 {
		t.Errorf("a trigger without mode started a cold cycle")
	}

	ts.src.overhead.Engines = []api.EngineOverhead{
		{Engine: "default", Mode: "steady"},
		{Engine: "default", Mode: "cold", CopyUp: &api.CopyUp{}},
	}
	for mode, want := range map[string][]string{"": {"steady", "cold"}, "steady": {"steady"}, "cold": {"cold"}} {
		target := "/api/v1/overhead"
		if mode != "" {
			target += "?mode=" + mode
		}
		rec := ts.do("GET", target, nil, "")
		var resp api.OverheadResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d, %v", target, rec.Code, err)
		}
		var got []string
		for _, e := range resp.Engines {
			got = append(got, string(e.Mode))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: modes %v, want %v", target, got, want)
		}
	}
}
