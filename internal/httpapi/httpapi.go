package httpapi

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// Defaults of Options.TriggerLimit and Options.TriggerBurst: a cycle takes
// minutes and writes to the engine's disk, so a client has no reason to
// start more than a few in a row.
const (
	DefaultTriggerInterval = 10 * time.Second // DefaultTriggerLimit is one per this
	DefaultTriggerBurst    = 3
)

// DefaultTriggerLimit is the default sustained rate of POST /api/v1/cycles.
var DefaultTriggerLimit = rate.Every(DefaultTriggerInterval)

// MaxBodyBytes bounds a request body. POST /api/v1/cycles takes none (an
// empty body or {}); the bound stops a client from making the agent read
// an arbitrary amount.
const MaxBodyBytes = 1 << 10

// Options configure New.
type Options struct {
	// Source answers the API; required.
	Source Source
	// Metrics serves GET /metrics (built by the metrics package). nil
	// leaves the route out (404).
	Metrics http.Handler
	// Logger receives request logs at debug level, failed authentication
	// at warn and internal errors at error. nil discards.
	Logger *slog.Logger
	// APIToken is the bearer token of POST /api/v1/cycles. Empty disables
	// the route: it answers 403 saying how to enable it (--api-token-file).
	// Surrounding white space (a file's trailing newline) is ignored.
	APIToken []byte
	// TriggerLimit and TriggerBurst rate-limit POST /api/v1/cycles across
	// all clients; 0 means DefaultTriggerLimit and DefaultTriggerBurst.
	TriggerLimit rate.Limit
	TriggerBurst int
}

// server holds what the handlers share. It is immutable after New except
// for the limiter, which triggerMu guards together with the trigger.
type server struct {
	src       Source
	logger    *slog.Logger
	auth      *tokenCheck // nil: POST /api/v1/cycles is disabled
	triggerMu sync.Mutex
	limiter   *rate.Limiter
	now       func() time.Time
}

// New returns the HTTP handler of the agent: a gin engine in release mode.
// It panics when o.Source is nil, a wiring mistake no request can cause.
func New(o Options) http.Handler {
	return newHandler(o, time.Now)
}

// newHandler is New with the clock that anchors ?since=24h (tests).
func newHandler(o Options, now func() time.Time) *gin.Engine {
	if o.Source == nil {
		panic("httpapi.New: Options.Source is nil")
	}
	s := &server{src: o.Source, logger: o.Logger, now: now}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if tok := trimSpace(o.APIToken); len(tok) > 0 {
		// Compare hashes, not the tokens: subtle.ConstantTimeCompare
		// returns early on a length mismatch, which would leak the length.
		s.auth = &tokenCheck{sum: sha256.Sum256(tok)}
	}
	limit, burst := o.TriggerLimit, o.TriggerBurst
	if limit <= 0 {
		limit = DefaultTriggerLimit
	}
	if burst <= 0 {
		burst = DefaultTriggerBurst
	}
	s.limiter = rate.NewLimiter(limit, burst)

	// Release mode: no route dump and no debug warnings on stdout (requests
	// are logged by logRequests, through slog). The mode is process-global
	// in gin, which is fine: this package is gin's only user.
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	// Trust no proxy: ClientIP() is then the TCP peer, and a client cannot
	// choose what is logged as its address with X-Forwarded-For.
	if err := e.SetTrustedProxies(nil); err != nil {
		panic(fmt.Errorf("httpapi: trust no proxies: %w", err)) // nil always parses
	}
	// A 405 with Allow (gin sets the header, RFC 9110 §15.5.6) rather than
	// a 404 when the path exists under another method.
	e.HandleMethodNotAllowed = true
	// A redirect is not an answer an API client can read; a 404 naming the
	// path is. A trailing slash or a path in the wrong case is a 404.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false

	// gin runs the middleware on the 404 and 405 answers too (Use, NoRoute
	// and NoMethod each rebuild those chains), so they carry the security
	// headers and are logged.
	e.Use(s.logRequests, securityHeaders, s.recovery)
	e.NoRoute(s.noRoute)
	e.NoMethod(s.noMethod)

	e.GET("/", s.status)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if o.Metrics != nil {
		e.GET("/metrics", gin.WrapH(o.Metrics))
	}
	v1 := e.Group("/api/v1")
	v1.GET("/overhead", s.overhead)
	v1.GET("/cycles", s.cycles)
	v1.POST("/cycles", s.trigger)
	v1.GET("/cycles/:id", s.cycle)
	v1.GET("/engines", s.engines)
	v1.GET("/containers", s.containers)
	v1.GET("/openapi.yaml", s.openapi)
	return e
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// logRequests logs every request at debug level, after the fact so the
// status is known. It never logs headers: Authorization holds the token.
func (s *server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.logger.LogAttrs(c.Request.Context(), slog.LevelDebug, "http request",
		slog.String("method", c.Request.Method),
		slog.String("path", c.Request.URL.Path),
		slog.String("route", c.FullPath()),
		slog.Int("status", c.Writer.Status()),
		slog.Float64("duration_seconds", time.Since(start).Seconds()),
		slog.String("remote_addr", c.ClientIP()),
	)
}

// securityHeaders applies to every answer. Nothing here is meant for a
// browser cache, and no answer may be sniffed into something executable or
// framed.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	c.Next()
}

// recovery turns a panic in a handler into a logged 500 with the JSON
// error shape, so one bad request cannot take the agent down nor leave the
// client with a dropped connection.
func (s *server) recovery(c *gin.Context) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
			panic(v) // net/http's signal to drop the connection silently
		}
		s.logger.Error("panic in HTTP handler", "method", c.Request.Method, "route", c.FullPath(),
			"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if c.Writer.Written() {
			// Too late for a status: the client sees a truncated body.
			c.Abort()
			return
		}
		abortError(c, http.StatusInternalServerError, codeInternal, "internal error; see the agent log")
	}()
	c.Next()
}

func (s *server) noRoute(c *gin.Context) {
	abortError(c, http.StatusNotFound, codeNotFound,
		fmt.Sprintf("no route %s %s; the routes are listed at / and described at /api/v1/openapi.yaml", c.Request.Method, quote(c.Request.URL.Path)))
}

// noMethod runs after gin has set the Allow header (RFC 9110 §15.5.6).
func (s *server) noMethod(c *gin.Context) {
	abortError(c, http.StatusMethodNotAllowed, codeMethodNotAllowed,
		fmt.Sprintf("method %s is not allowed on %s; allowed: %s", quote(c.Request.Method), quote(c.Request.URL.Path), c.Writer.Header().Get("Allow")))
}
