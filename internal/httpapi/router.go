package httpapi

import (
	"net"
	"net/http"
	"strings"
)

// The router is net/http's own, a dozen routes matched by hand: a web
// framework brought a QUIC stack, a MongoDB codec and a validator into the
// agent's binary for these (docs/benchmarks.md, footprint). What it keeps
// of one: a chain of handlers that middleware continues with c.Next(),
// answers written through a writer that remembers the status, a 404 and a
// 405 (with Allow) answered by handlers of the API's JSON error shape, and
// no redirect of any kind (a trailing slash is a 404).

// handlerFunc is one link of a request's chain.
type handlerFunc func(*reqCtx)

// reqCtx is one request on its way through the chain.
type reqCtx struct {
	Writer  *respWriter
	Request *http.Request

	route    string // the matched pattern, "" for none (404, 405)
	id       string // the :id segment of /api/v1/cycles/:id
	handlers []handlerFunc
	index    int
}

// abortIndex is past any chain: Next runs nothing more.
const abortIndex = 1 << 30

// Next runs the rest of the chain; middleware calls it and continues after.
func (c *reqCtx) Next() {
	c.index++
	for c.index < len(c.handlers) {
		c.handlers[c.index](c)
		c.index++
	}
}

// Abort stops the chain after the running handler.
func (c *reqCtx) Abort() { c.index = abortIndex }

// AbortWithStatus answers status with no body and stops the chain.
func (c *reqCtx) AbortWithStatus(status int) {
	c.Writer.WriteHeader(status)
	c.Writer.writeHeaderNow()
	c.Abort()
}

// Data answers status with body of the given content type.
func (c *reqCtx) Data(status int, contentType string, body []byte) {
	c.Writer.Header().Set("Content-Type", contentType)
	c.Writer.WriteHeader(status)
	_, _ = c.Writer.Write(body)
}

// Header sets an answer's header; "" removes it.
func (c *reqCtx) Header(key, value string) {
	if value == "" {
		c.Writer.Header().Del(key)
		return
	}
	c.Writer.Header().Set(key, value)
}

// Param is a path parameter; the only one is "id".
func (c *reqCtx) Param(name string) string {
	if name == "id" {
		return c.id
	}
	return ""
}

// FullPath is the matched route's pattern, for logs.
func (c *reqCtx) FullPath() string { return c.route }

// ClientIP is the TCP peer's address. No proxy is trusted: a client cannot
// choose what is logged as its address with X-Forwarded-For.
func (c *reqCtx) ClientIP() string {
	host, _, err := net.SplitHostPort(strings.TrimSpace(c.Request.RemoteAddr))
	if err != nil {
		return ""
	}
	return host
}

// respWriter holds the status back until the body is written, so that
// middleware can still learn (Status) and change it, and tells whether
// anything was sent (Written).
type respWriter struct {
	http.ResponseWriter
	status  int
	written bool
}

func (w *respWriter) WriteHeader(code int) {
	if code > 0 && !w.written {
		w.status = code
	}
}

func (w *respWriter) writeHeaderNow() {
	if !w.written {
		w.written = true
		w.ResponseWriter.WriteHeader(w.status)
	}
}

func (w *respWriter) Write(b []byte) (int, error) {
	w.writeHeaderNow()
	return w.ResponseWriter.Write(b)
}

// Status is the answer's status, 200 until one is set.
func (w *respWriter) Status() int { return w.status }

// Written tells whether the status line has gone out.
func (w *respWriter) Written() bool { return w.written }

// Flush lets a streaming handler (none today) push what it wrote.
func (w *respWriter) Flush() {
	w.writeHeaderNow()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap serves http.ResponseController.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// route is one path's handlers by method, in the order they were added
// (the order of a 405's Allow header).
type route struct {
	pattern string
	methods []string
	byVerb  map[string]handlerFunc
}

// router matches a request's path exactly, or as /api/v1/cycles/:id.
type router struct {
	middleware []handlerFunc
	routes     map[string]*route
	cycleByID  *route // /api/v1/cycles/:id
	noRoute    handlerFunc
	noMethod   handlerFunc
}

const cyclePrefix = "/api/v1/cycles/"

func newRouter() *router { return &router{routes: map[string]*route{}} }

// Use appends middleware to every chain, the 404 and 405 answers included.
func (r *router) Use(h ...handlerFunc) { r.middleware = append(r.middleware, h...) }

func (r *router) GET(pattern string, h handlerFunc)  { r.add(http.MethodGet, pattern, h) }
func (r *router) POST(pattern string, h handlerFunc) { r.add(http.MethodPost, pattern, h) }

func (r *router) add(method, pattern string, h handlerFunc) {
	var rt *route
	if pattern == cyclePrefix+":id" {
		if r.cycleByID == nil {
			r.cycleByID = &route{pattern: pattern, byVerb: map[string]handlerFunc{}}
		}
		rt = r.cycleByID
	} else {
		rt = r.routes[pattern]
		if rt == nil {
			rt = &route{pattern: pattern, byVerb: map[string]handlerFunc{}}
			r.routes[pattern] = rt
		}
	}
	rt.methods = append(rt.methods, method)
	rt.byVerb[method] = h
}

// match finds the route of path and the :id it carries.
func (r *router) match(path string) (*route, string) {
	if rt, ok := r.routes[path]; ok {
		return rt, ""
	}
	if id, ok := strings.CutPrefix(path, cyclePrefix); ok && r.cycleByID != nil && id != "" && !strings.Contains(id, "/") {
		return r.cycleByID, id
	}
	return nil, ""
}

// routeInfo is a route served: a method and a pattern (":id" for a
// parameter).
type routeInfo struct{ Method, Path string }

// Routes lists every route served, for the check against the OpenAPI spec.
func (r *router) Routes() []routeInfo {
	var out []routeInfo
	add := func(rt *route) {
		for _, m := range rt.methods {
			out = append(out, routeInfo{Method: m, Path: rt.pattern})
		}
	}
	for _, rt := range r.routes {
		add(rt)
	}
	if r.cycleByID != nil {
		add(r.cycleByID)
	}
	return out
}

// wrapH runs a plain http.Handler as the end of a chain.
func wrapH(h http.Handler) handlerFunc {
	return func(c *reqCtx) { h.ServeHTTP(c.Writer, c.Request) }
}

func (r *router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	c := &reqCtx{Writer: &respWriter{ResponseWriter: w, status: http.StatusOK}, Request: req, index: -1}
	rt, id := r.match(req.URL.Path)
	var last handlerFunc
	switch {
	case rt == nil:
		last = r.noRoute
	case rt.byVerb[req.Method] != nil:
		last, c.route, c.id = rt.byVerb[req.Method], rt.pattern, id
	default:
		// RFC 9110 §15.5.6: a 405 says which methods the path has.
		c.Writer.Header().Set("Allow", strings.Join(rt.methods, ", "))
		last = r.noMethod
	}
	c.handlers = append(append(make([]handlerFunc, 0, len(r.middleware)+1), r.middleware...), last)
	c.Next()
	c.Writer.writeHeaderNow()
}
