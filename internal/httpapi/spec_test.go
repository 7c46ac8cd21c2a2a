package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	legacyrouter "github.com/getkin/kin-openapi/routers/legacy"
	"golang.org/x/time/rate"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

const testToken = "t0k3n-for-tests-5f1c9a"

// allCodes are the error codes the handlers produce; the spec's enum must
// list exactly these and the conformance table must produce each.
var allCodes = []string{
	codeBadParameter, codeNotFound, codeMethodNotAllowed, codeUnauthorized, codeForbidden,
	codeConflict, codeRateLimited, codePayloadTooLarge, codeInternal, codeNotReady,
}

func init() {
	// The landing page's schema is a string; kin-openapi has no decoder
	// for text/html by default.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
}

func loadSpec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	router, err := legacyrouter.NewRouter(doc)
	if err != nil {
		t.Fatalf("router from api/openapi.yaml: %v", err)
	}
	return doc, router
}

// metricsHandler stands in for the metrics package's promhttp handler.
var metricsHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprintln(w, "# HELP layerprobe_cycles_total Measurement cycles.\n# TYPE layerprobe_cycles_total counter")
	fmt.Fprintln(w, `layerprobe_cycles_total{engine="default",result="ok"} 3`)
})

type apiCase struct {
	name   string
	method string
	target string // path and query
	header map[string]string
	body   string
	opts   func(*Options)
	src    func(*fakeSource)
	before int // identical requests sent first (rate limit)

	status int
	code   string // expected error code; "" for a success
	// specRejects: the spec alone already refuses the request (schema,
	// security). false for what OpenAPI cannot say: unknown query
	// parameters, the syntax of since, a wrong token, server state.
	specRejects bool
	check       func(t *testing.T, rec *httptest.ResponseRecorder, f *fakeSource)
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func jsonBody(h map[string]string) map[string]string {
	out := map[string]string{"Content-Type": "application/json"}
	for k, v := range h {
		out[k] = v
	}
	return out
}

func panicking(f *fakeSource) { f.panicWith = "boom: nil map in fake" }
func notReady(f *fakeSource)  { f.err = fmt.Errorf("engine default: %w", ErrNotReady) }

func (c apiCase) request() *http.Request {
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req := httptest.NewRequest(c.method, c.target, body)
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	return req
}

// serve runs c against a fresh handler and returns the answer.
func (c apiCase) serve(t *testing.T, logger *slog.Logger) (*httptest.ResponseRecorder, *fakeSource) {
	t.Helper()
	f := newFakeSource()
	if c.src != nil {
		c.src(f)
	}
	o := Options{Source: f, Metrics: metricsHandler, Logger: logger, APIToken: []byte(testToken)}
	if c.opts != nil {
		c.opts(&o)
	}
	h := newHandler(o, func() time.Time { return t0 })
	for range c.before {
		h.ServeHTTP(httptest.NewRecorder(), c.request())
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, c.request())
	return rec, f
}

// conformanceCases exercise every route and every status the spec
// documents, valid and invalid.
func conformanceCases() []apiCase {
	hourly := func(o *Options) { o.TriggerBurst, o.TriggerLimit = 1, rate.Every(time.Hour) }
	return []apiCase{
		// GET /
		{name: "landing", method: "GET", target: "/", status: 200, check: func(t *testing.T, rec *httptest.ResponseRecorder, _ *fakeSource) {
			for _, p := range []string{"/metrics", "/api/v1/overhead", "/api/v1/cycles", "/api/v1/engines", "/api/v1/containers", "/api/v1/openapi.yaml", "/healthz", "/readyz"} {
				if !strings.Contains(rec.Body.String(), `href="`+p+`"`) {
					t.Errorf("landing page does not link %s", p)
				}
			}
		}},

		// health
		{name: "healthz", method: "GET", target: "/healthz", status: 200, src: notReady},
		{name: "readyz ok", method: "GET", target: "/readyz", status: 200},
		{name: "readyz not ready", method: "GET", target: "/readyz", status: 503,
			src: func(f *fakeSource) { f.readyErr = errors.New("first engine check still running") },
			check: func(t *testing.T, rec *httptest.ResponseRecorder, _ *fakeSource) {
				var h api.Health
				mustJSON(t, rec, &h)
				if h.Status != "not_ready" || h.Detail != "first engine check still running" {
					t.Errorf("readyz body = %+v", h)
				}
			}},
		{name: "readyz panics", method: "GET", target: "/readyz", status: 500, code: codeInternal, src: panicking},

		// metrics
		{name: "metrics", method: "GET", target: "/metrics", status: 200},
		{name: "metrics ignores params", method: "GET", target: "/metrics?collect=x", status: 200},
		{name: "metrics panics", method: "GET", target: "/metrics", status: 500, code: codeInternal,
			opts: func(o *Options) {
				o.Metrics = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("collector bug") })
			}},

		// openapi
		{name: "openapi", method: "GET", target: "/api/v1/openapi.yaml", status: 200, check: func(t *testing.T, rec *httptest.ResponseRecorder, _ *fakeSource) {
			if !bytes.Equal(rec.Body.Bytes(), api.OpenAPI) {
				t.Error("GET /api/v1/openapi.yaml does not serve api.OpenAPI")
			}
		}},
		{name: "openapi unknown param", method: "GET", target: "/api/v1/openapi.yaml?format=json", status: 400, code: codeBadParameter},

		// overhead
		{name: "overhead", method: "GET", target: "/api/v1/overhead", status: 200},
		{name: "overhead unknown param", method: "GET", target: "/api/v1/overhead?engine=default", status: 400, code: codeBadParameter},
		{name: "overhead panics", method: "GET", target: "/api/v1/overhead", status: 500, code: codeInternal, src: panicking},
		{name: "overhead source error", method: "GET", target: "/api/v1/overhead", status: 500, code: codeInternal,
			src: func(f *fakeSource) { f.err = errors.New("open /var/lib/layerprobe/state.db: permission denied") }},
		{name: "overhead not ready", method: "GET", target: "/api/v1/overhead", status: 503, code: codeNotReady, src: notReady},

		// cycles
		{name: "cycles", method: "GET", target: "/api/v1/cycles", status: 200},
		{name: "cycles all params", method: "GET", target: "/api/v1/cycles?limit=2&since=2025-03-01T10:00:00Z&engine=default", status: 200},
		{name: "cycles since duration", method: "GET", target: "/api/v1/cycles?since=24h", status: 200},
		{name: "cycles limit 0", method: "GET", target: "/api/v1/cycles?limit=0", status: 400, code: codeBadParameter, specRejects: true},
		{name: "cycles limit 1001", method: "GET", target: "/api/v1/cycles?limit=1001", status: 400, code: codeBadParameter, specRejects: true},
		{name: "cycles limit abc", method: "GET", target: "/api/v1/cycles?limit=abc", status: 400, code: codeBadParameter, specRejects: true},
		{name: "cycles engine bad", method: "GET", target: "/api/v1/cycles?engine=Bad..Name", status: 400, code: codeBadParameter, specRejects: true},
		{name: "cycles since bad", method: "GET", target: "/api/v1/cycles?since=yesterday", status: 400, code: codeBadParameter},
		{name: "cycles unknown param", method: "GET", target: "/api/v1/cycles?limt=5", status: 400, code: codeBadParameter},
		{name: "cycles panics", method: "GET", target: "/api/v1/cycles", status: 500, code: codeInternal, src: panicking},
		{name: "cycles not ready", method: "GET", target: "/api/v1/cycles", status: 503, code: codeNotReady, src: notReady},

		// cycles/{id}
		{name: "cycle", method: "GET", target: "/api/v1/cycles/42", status: 200},
		{name: "cycle with nil lists", method: "GET", target: "/api/v1/cycles/41", status: 200},
		{name: "cycle id abc", method: "GET", target: "/api/v1/cycles/abc", status: 400, code: codeBadParameter, specRejects: true},
		{name: "cycle id 0", method: "GET", target: "/api/v1/cycles/0", status: 400, code: codeBadParameter, specRejects: true},
		{name: "cycle id overflow", method: "GET", target: "/api/v1/cycles/99999999999999999999", status: 400, code: codeBadParameter, specRejects: true},
		{name: "cycle unknown param", method: "GET", target: "/api/v1/cycles/42?raw=1", status: 400, code: codeBadParameter},
		{name: "cycle unknown id", method: "GET", target: "/api/v1/cycles/999", status: 404, code: codeNotFound},
		{name: "cycle panics", method: "GET", target: "/api/v1/cycles/42", status: 500, code: codeInternal, src: panicking},
		{name: "cycle not ready", method: "GET", target: "/api/v1/cycles/42", status: 503, code: codeNotReady, src: notReady},

		// engines
		{name: "engines", method: "GET", target: "/api/v1/engines", status: 200},
		{name: "engines unknown param", method: "GET", target: "/api/v1/engines?name=default", status: 400, code: codeBadParameter},
		{name: "engines panics", method: "GET", target: "/api/v1/engines", status: 500, code: codeInternal, src: panicking},
		{name: "engines not ready", method: "GET", target: "/api/v1/engines", status: 503, code: codeNotReady, src: notReady},

		// containers
		{name: "containers", method: "GET", target: "/api/v1/containers", status: 200, check: func(t *testing.T, rec *httptest.ResponseRecorder, _ *fakeSource) {
			var r api.ContainersResponse
			mustJSON(t, rec, &r)
			if len(r.Engines) != 2 || r.Engines[1].Containers == nil || r.Engines[1].LayerVsVolume == nil || len(r.Engines[0].Containers) != 2 {
				t.Errorf("containers answer %+v: want both engines, lists never null", r)
			}
		}},
		{name: "containers of one engine", method: "GET", target: "/api/v1/containers?engine=btrfs-lab", status: 200,
			check: func(t *testing.T, rec *httptest.ResponseRecorder, _ *fakeSource) {
				var r api.ContainersResponse
				mustJSON(t, rec, &r)
				if len(r.Engines) != 1 || r.Engines[0].Engine != "btrfs-lab" {
					t.Errorf("engine=btrfs-lab answered %+v", r.Engines)
				}
			}},
		{name: "containers of an unknown engine", method: "GET", target: "/api/v1/containers?engine=nope", status: 200},
		{name: "containers engine bad", method: "GET", target: "/api/v1/containers?engine=Bad..Name", status: 400, code: codeBadParameter, specRejects: true},
		{name: "containers unknown param", method: "GET", target: "/api/v1/containers?limit=5", status: 400, code: codeBadParameter},
		{name: "containers engine twice", method: "GET", target: "/api/v1/containers?engine=a&engine=b", status: 400, code: codeBadParameter},
		{name: "containers panics", method: "GET", target: "/api/v1/containers", status: 500, code: codeInternal, src: panicking},
		{name: "containers not ready", method: "GET", target: "/api/v1/containers", status: 503, code: codeNotReady, src: notReady},

		// POST /api/v1/cycles
		{name: "trigger", method: "POST", target: "/api/v1/cycles", header: bearer(testToken), status: 202},
		{name: "trigger empty object", method: "POST", target: "/api/v1/cycles", header: jsonBody(bearer(testToken)), body: " {} \n", status: 202},
		{name: "trigger disabled", method: "POST", target: "/api/v1/cycles", header: bearer(testToken), status: 403, code: codeForbidden,
			opts: func(o *Options) { o.APIToken = nil }},
		{name: "trigger no token", method: "POST", target: "/api/v1/cycles", status: 401, code: codeUnauthorized, specRejects: true},
		{name: "trigger wrong token", method: "POST", target: "/api/v1/cycles", header: bearer("guess"), status: 401, code: codeUnauthorized},
		{name: "trigger basic auth", method: "POST", target: "/api/v1/cycles", header: map[string]string{"Authorization": "Basic dXNlcjpwYXNz"},
			status: 401, code: codeUnauthorized, specRejects: true},
		{name: "trigger body field", method: "POST", target: "/api/v1/cycles", header: jsonBody(bearer(testToken)), body: `{"profile":"seed"}`,
			status: 400, code: codeBadParameter, specRejects: true},
		{name: "trigger query param", method: "POST", target: "/api/v1/cycles?profile=seed", header: bearer(testToken), status: 400, code: codeBadParameter},
		{name: "trigger body too large", method: "POST", target: "/api/v1/cycles", header: jsonBody(bearer(testToken)),
			body: `{"x":"` + strings.Repeat("a", 2*MaxBodyBytes) + `"}`, status: 413, code: codePayloadTooLarge, specRejects: true},
		{name: "trigger busy", method: "POST", target: "/api/v1/cycles", header: bearer(testToken), status: 409, code: codeConflict,
			src: func(f *fakeSource) { f.busy = true }},
		{name: "trigger rate limited", method: "POST", target: "/api/v1/cycles", header: bearer(testToken), opts: hourly, before: 1,
			status: 429, code: codeRateLimited},
		{name: "trigger panics", method: "POST", target: "/api/v1/cycles", header: bearer(testToken), status: 500, code: codeInternal, src: panicking},
		{name: "trigger not ready", method: "POST", target: "/api/v1/cycles", header: bearer(testToken), status: 503, code: codeNotReady, src: notReady},

		// outside the document's operations
		{name: "unknown route", method: "GET", target: "/api/v2/overhead", status: 404, code: codeNotFound},
		{name: "trailing slash", method: "GET", target: "/api/v1/engines/", status: 404, code: codeNotFound},
		{name: "delete cycles", method: "DELETE", target: "/api/v1/cycles", status: 405, code: codeMethodNotAllowed},
		{name: "post healthz", method: "POST", target: "/healthz", status: 405, code: codeMethodNotAllowed},
		{name: "put cycle", method: "PUT", target: "/api/v1/cycles/42", status: 405, code: codeMethodNotAllowed},
	}
}

// TestSpecConformance sends real requests to the handler and validates
// request and response against api/openapi.yaml, then checks that every
// route, every documented status and every error code was exercised.
func TestSpecConformance(t *testing.T) {
	doc, router := loadSpec(t)
	covered := map[string]bool{}
	codes := map[string]bool{}
	authPresent := func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		// The spec can only say a bearer token must be there; whether it
		// is the right one is the server's business.
		scheme, tok, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return errors.New("no bearer token")
		}
		return nil
	}

	for _, c := range conformanceCases() {
		t.Run(c.name, func(t *testing.T) {
			rec, f := c.serve(t, slog.New(slog.DiscardHandler))
			if rec.Code != c.status {
				t.Fatalf("%s %s = %d, want %d; body %s", c.method, c.target, rec.Code, c.status, rec.Body)
			}
			checkCommonHeaders(t, rec)
			if c.code != "" {
				e := mustError(t, rec)
				if e.Error.Code != c.code {
					t.Errorf("error code = %q, want %q (message %q)", e.Error.Code, c.code, e.Error.Message)
				}
				codes[e.Error.Code] = true
			}
			if c.check != nil {
				c.check(t, rec, f)
			}

			req := c.request()
			route, params, err := router.FindRoute(req)
			if p := req.URL.Path; p != "/" && strings.HasSuffix(p, "/") && err == nil {
				// kin's router ignores a trailing slash; OpenAPI paths
				// (and the handler) do not.
				err = &routers.RouteError{Reason: routers.ErrPathNotFound.Error()}
			}
			var re *routers.RouteError
			if errors.As(err, &re) {
				name := map[string]string{
					routers.ErrPathNotFound.Error():     "NoRoute",
					routers.ErrMethodNotAllowed.Error(): "MethodNotAllowed",
				}[re.Reason]
				if name == "" {
					t.Fatalf("FindRoute: %v", err)
				}
				validateComponentResponse(t, doc, name, rec)
				covered["component "+name] = true
				return
			}
			if err != nil {
				t.Fatalf("FindRoute: %v", err)
			}
			in := &openapi3filter.RequestValidationInput{
				Request: req, PathParams: params, Route: route,
				Options: &openapi3filter.Options{AuthenticationFunc: authPresent, MultiError: true},
			}
			err = openapi3filter.ValidateRequest(context.Background(), in)
			switch {
			case c.specRejects && err == nil:
				t.Errorf("the spec accepts %s %s, which the handler refuses with %d: tighten the spec", c.method, c.target, rec.Code)
			case !c.specRejects && err != nil:
				t.Errorf("the spec refuses the request: %v", err)
			}
			out := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: in,
				Status:                 rec.Code,
				Header:                 rec.Header(),
				Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
			}
			out.SetBodyBytes(rec.Body.Bytes())
			if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
				t.Errorf("response does not match the spec: %v\nbody: %.2000s", err, rec.Body)
			}
			covered[route.Method+" "+route.Path+" "+strconv.Itoa(rec.Code)] = true
		})
	}

	// Every documented operation and status was exercised.
	var missing []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if k := method + " " + path + " " + status; !covered[k] {
					missing = append(missing, k)
				}
			}
		}
	}
	for name := range doc.Components.Responses {
		if name == "NoRoute" || name == "MethodNotAllowed" {
			if !covered["component "+name] {
				missing = append(missing, "component "+name)
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("documented but never exercised: %s", m)
	}
	for _, code := range allCodes {
		if !codes[code] {
			t.Errorf("error code %q is never produced by a conformance case", code)
		}
	}
}

// validateComponentResponse checks an answer that belongs to no operation
// (unknown path, wrong method) against a reusable response of the spec.
func validateComponentResponse(t *testing.T, doc *openapi3.T, name string, rec *httptest.ResponseRecorder) {
	t.Helper()
	ref := doc.Components.Responses[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("spec has no components/responses/%s", name)
	}
	for h, hr := range ref.Value.Headers {
		if hr.Value.Required && rec.Header().Get(h) == "" {
			t.Errorf("components/responses/%s requires header %s; the answer has none", name, h)
		}
	}
	mt := ref.Value.Content.Get(rec.Header().Get("Content-Type"))
	if mt == nil {
		t.Fatalf("components/responses/%s has no content for %q", name, rec.Header().Get("Content-Type"))
	}
	var v any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	if err := mt.Schema.Value.VisitJSON(v, openapi3.VisitAsResponse(), openapi3.MultiErrors()); err != nil {
		t.Errorf("answer does not match components/responses/%s: %v", name, err)
	}
}

func checkCommonHeaders(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
		if got := rec.Header().Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
}

func mustJSON(t *testing.T, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v; body %s", v, err, rec.Body)
	}
}

// mustError decodes the error shape and checks it is complete.
func mustError(t *testing.T, rec *httptest.ResponseRecorder) api.ErrorResponse {
	t.Helper()
	var e api.ErrorResponse
	mustJSON(t, rec, &e)
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error body %s lacks code or message", rec.Body)
	}
	return e
}

// TestSpecRoutesMatchHandler: every route the handler serves is in the
// spec, so a new route cannot ship undocumented (the coverage check of
// TestSpecConformance then demands a test for it).
func TestSpecRoutesMatchHandler(t *testing.T) {
	doc, _ := loadSpec(t)
	h := newHandler(Options{Source: newFakeSource(), Metrics: metricsHandler}, time.Now)
	served := map[string]bool{}
	for _, r := range h.Routes() {
		path := r.Path
		if i := strings.Index(path, ":"); i >= 0 {
			path = path[:i] + "{" + path[i+1:] + "}"
		}
		served[r.Method+" "+path] = true
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("handler serves %s %s, which api/openapi.yaml does not describe", r.Method, path)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] {
				t.Errorf("api/openapi.yaml describes %s %s, which the handler does not serve", method, path)
			}
		}
	}
}

// TestSpecErrorCodes: the spec's enum of error codes is the handler's set.
func TestSpecErrorCodes(t *testing.T) {
	doc, _ := loadSpec(t)
	var enum []string
	for _, v := range doc.Components.Schemas["ErrorBody"].Value.Properties["code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	want := slices.Clone(allCodes)
	slices.Sort(enum)
	slices.Sort(want)
	if !slices.Equal(enum, want) {
		t.Errorf("ErrorBody.code enum = %v, want %v", enum, want)
	}
}

// TestSpecMatchesGoTypes keeps the schemas in step with the Go types the
// API writes: the same JSON field names, required exactly when the Go
// field is not omitempty, nullable exactly when Go may write null (a
// pointer without omitempty, or a float of a type whose MarshalJSON writes
// NaN as null), and compatible JSON types.
func TestSpecMatchesGoTypes(t *testing.T) {
	doc, _ := loadSpec(t)
	pairs := []struct {
		schema string
		typ    reflect.Type
	}{
		{"ErrorResponse", reflect.TypeFor[api.ErrorResponse]()},
		{"ErrorBody", reflect.TypeFor[api.ErrorBody]()},
		{"Health", reflect.TypeFor[api.Health]()},
		{"OverheadResponse", reflect.TypeFor[api.OverheadResponse]()},
		{"EngineOverhead", reflect.TypeFor[api.EngineOverhead]()},
		{"Cycle", reflect.TypeFor[api.Cycle]()},
		{"CyclesResponse", reflect.TypeFor[api.CyclesResponse]()},
		{"CycleDetail", reflect.TypeFor[api.CycleDetail]()},
		{"Engine", reflect.TypeFor[api.Engine]()},
		{"EnginesResponse", reflect.TypeFor[api.EnginesResponse]()},
		{"ContainersResponse", reflect.TypeFor[api.ContainersResponse]()},
		{"EngineContainers", reflect.TypeFor[api.EngineContainers]()},
		{"AdvisorPass", reflect.TypeFor[api.AdvisorPass]()},
		{"LayerOverhead", reflect.TypeFor[api.LayerOverhead]()},
		{"Container", reflect.TypeFor[api.Container]()},
		{"LayerWrites", reflect.TypeFor[api.LayerWrites]()},
		{"PathBytes", reflect.TypeFor[api.PathBytes]()},
		{"BlockWrites", reflect.TypeFor[api.BlockWrites]()},
		{"MountWrites", reflect.TypeFor[api.MountWrites]()},
		{"Landing", reflect.TypeFor[api.Landing]()},
		{"Database", reflect.TypeFor[api.Database]()},
		{"LayerCost", reflect.TypeFor[api.LayerCost]()},
		{"Advice", reflect.TypeFor[api.Advice]()},
		{"TriggerResponse", reflect.TypeFor[api.TriggerResponse]()},
		{"Result", reflect.TypeFor[api.Result]()},
		{"Raw", reflect.TypeFor[api.Raw]()},
		{"Overhead", reflect.TypeFor[api.Overhead]()},
		{"Failure", reflect.TypeFor[api.FailedRound]()},
		{"Sample", reflect.TypeFor[api.Sample]()},
		{"Op", reflect.TypeFor[api.Op]()},
		{"FioFailure", reflect.TypeFor[api.Failure]()},
	}
	for _, p := range pairs {
		t.Run(p.schema, func(t *testing.T) {
			ref := doc.Components.Schemas[p.schema]
			if ref == nil {
				t.Fatalf("no components/schemas/%s", p.schema)
			}
			s := ref.Value
			if s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has {
				t.Errorf("%s should say additionalProperties: false to catch drift", p.schema)
			}
			nanIsNull := p.typ.Implements(reflect.TypeFor[json.Marshaler]())
			fields := jsonFields(p.typ)
			for name, f := range fields {
				ps := s.Properties[name]
				if ps == nil {
					t.Errorf("%s.%s (Go %s) is missing from the schema", p.schema, name, f.typ)
					continue
				}
				if got, want := slices.Contains(s.Required, name), !f.omitempty; got != want {
					t.Errorf("%s.%s: required = %v, want %v (omitempty = %v)", p.schema, name, got, want, f.omitempty)
				}
				wantNull := (f.typ.Kind() == reflect.Pointer && !f.omitempty) || (nanIsNull && f.typ.Kind() == reflect.Float64)
				if ps.Value.Nullable != wantNull {
					t.Errorf("%s.%s: nullable = %v, want %v", p.schema, name, ps.Value.Nullable, wantNull)
				}
				if want := jsonType(f.typ); want != "" {
					got := ps.Value
					if len(got.AllOf) == 1 { // nullable $ref
						got = got.AllOf[0].Value
					}
					if !got.Type.Is(want) {
						t.Errorf("%s.%s: type %v, want %s (Go %s)", p.schema, name, got.Type, want, f.typ)
					}
					if f.typ == reflect.TypeFor[time.Time]() && got.Format != "date-time" {
						t.Errorf("%s.%s: format %q, want date-time", p.schema, name, got.Format)
					}
				}
			}
			for name := range s.Properties {
				if _, ok := fields[name]; !ok {
					t.Errorf("schema %s has property %q, which Go type %s does not write", p.schema, name, p.typ)
				}
			}
			for _, name := range s.Required {
				if _, ok := s.Properties[name]; !ok {
					t.Errorf("schema %s requires %q, which it does not define", p.schema, name)
				}
			}
		})
	}
}

type jsonField struct {
	typ       reflect.Type
	omitempty bool
}

// jsonFields lists the JSON members encoding/json writes for t, with
// embedded structs flattened.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	return out
}

func jsonType(t reflect.Type) string {
	if t == reflect.TypeFor[time.Time]() {
		return "string"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return ""
}

// TestSpecEnums ties the spec's enums to the Go constants they mirror.
func TestSpecEnums(t *testing.T) {
	doc, _ := loadSpec(t)
	enum := func(schema string) []string {
		var out []string
		for _, v := range doc.Components.Schemas[schema].Value.Enum {
			out = append(out, v.(string))
		}
		return out
	}
	workloads := strs(measure.Workloads)
	reasons := strs(measure.Reasons)
	var metrics []string
	for name := range doc.Components.Schemas["Result"].Value.Properties["overhead"].Value.Properties {
		metrics = append(metrics, name)
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"Workload", enum("Workload"), workloads},
		{"Target", enum("Target"), strs(measure.Targets)},
		{"FailureReason", enum("FailureReason"), reasons},
		{"Result.overhead keys", metrics, measure.Metrics},
	} {
		got, want := slices.Sorted(slices.Values(c.got)), slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", c.what, got, want)
		}
	}
}

// strs converts a list of typed names to strings.
func strs[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}
