package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/layerprobe/layerprobe/api"
)

// healthz answers 200 for as long as the process serves HTTP: liveness
// must not depend on Docker or fio, or a slow engine would get the agent
// restarted in a loop.
func (s *server) healthz(c *gin.Context) {
	writeJSON(c, s.logger, http.StatusOK, api.Health{Status: "ok"})
}

// readyz is 503 until the Source says it can answer (first engine check
// done), so a load balancer or DaemonSet rollout waits for real data.
func (s *server) readyz(c *gin.Context) {
	if err := s.src.Ready(); err != nil {
		writeJSON(c, s.logger, http.StatusServiceUnavailable, api.Health{Status: "not_ready", Detail: err.Error()})
		return
	}
	writeJSON(c, s.logger, http.StatusOK, api.Health{Status: "ok"})
}

// noParams refuses any query parameter on a route that takes none.
func noParams(c *gin.Context) bool {
	if _, err := parseQuery(c.Request.URL.RawQuery); err != nil {
		abortError(c, http.StatusBadRequest, codeBadParameter, err.Error())
		return false
	}
	return true
}

func (s *server) openapi(c *gin.Context) {
	if !noParams(c) {
		return
	}
	c.Data(http.StatusOK, "application/yaml", api.OpenAPI)
}

func (s *server) overhead(c *gin.Context) {
	mode, err := parseMode(c.Request.URL.RawQuery)
	if err != nil {
		abortError(c, http.StatusBadRequest, codeBadParameter, err.Error())
		return
	}
	resp, err := s.src.Overhead(c.Request.Context())
	if err != nil {
		s.sourceError(c, "reading the overhead", err)
		return
	}
	resp.Engines = nonNil(slices.Clone(resp.Engines))
	if mode != "" {
		resp.Engines = slices.DeleteFunc(resp.Engines, func(e api.EngineOverhead) bool { return e.Mode != mode })
	}
	for i := range resp.Engines {
		resp.Engines[i].Results = nonNil(resp.Engines[i].Results)
	}
	writeJSON(c, s.logger, http.StatusOK, resp)
}

func (s *server) cycles(c *gin.Context) {
	q, err := parseCycleQuery(c.Request.URL.RawQuery, s.now())
	if err != nil {
		abortError(c, http.StatusBadRequest, codeBadParameter, err.Error())
		return
	}
	list, err := s.src.Cycles(c.Request.Context(), q)
	if err != nil {
		s.sourceError(c, "listing cycles", err)
		return
	}
	if len(list) > q.Limit {
		list = list[:q.Limit] // the limit is a promise to the client, whatever the Source did
	}
	writeJSON(c, s.logger, http.StatusOK, api.CyclesResponse{Cycles: nonNil(list)})
}

func (s *server) cycle(c *gin.Context) {
	id, err := parseID(c.Param("id"))
	if err != nil {
		abortError(c, http.StatusBadRequest, codeBadParameter, err.Error())
		return
	}
	if !noParams(c) {
		return
	}
	d, err := s.src.Cycle(c.Request.Context(), id)
	if errors.Is(err, ErrNotFound) {
		abortError(c, http.StatusNotFound, codeNotFound,
			fmt.Sprintf("no cycle with id %d; GET /api/v1/cycles lists the cycles kept", id))
		return
	}
	if err != nil {
		s.sourceError(c, "reading a cycle", err)
		return
	}
	d.Samples = nonNil(d.Samples)
	d.Results = nonNil(d.Results)
	writeJSON(c, s.logger, http.StatusOK, d)
}

func (s *server) engines(c *gin.Context) {
	if !noParams(c) {
		return
	}
	list, err := s.src.Engines(c.Request.Context())
	if err != nil {
		s.sourceError(c, "listing engines", err)
		return
	}
	// Clone before filling in empty lists: the Source may hand out its
	// own cached slice, shared with concurrent requests.
	list = nonNil(slices.Clone(list))
	for i := range list {
		list[i].Warnings = nonNil(list[i].Warnings)
		if list[i].FsyncRegression == nil {
			list[i].FsyncRegression = map[string]bool{}
		}
		if list[i].Detector == nil {
			list[i].Detector = map[string]api.DetectorState{}
		}
	}
	writeJSON(c, s.logger, http.StatusOK, api.EnginesResponse{Engines: list})
}

// containers answers the layer-write advisor's last pass, optionally of one
// engine (an engine that is not configured has no entry: an empty list).
func (s *server) containers(c *gin.Context) {
	engine, err := parseEngineQuery(c.Request.URL.RawQuery)
	if err != nil {
		abortError(c, http.StatusBadRequest, codeBadParameter, err.Error())
		return
	}
	resp, err := s.src.Containers(c.Request.Context())
	if err != nil {
		s.sourceError(c, "listing containers", err)
		return
	}
	// Clone before filtering: the Source may hand out a shared slice.
	resp.Engines = nonNil(slices.Clone(resp.Engines))
	if engine != "" {
		resp.Engines = slices.DeleteFunc(resp.Engines, func(e api.EngineContainers) bool { return e.Engine != engine })
	}
	for i := range resp.Engines {
		resp.Engines[i].Containers = nonNil(resp.Engines[i].Containers)
		resp.Engines[i].LayerVsVolume = nonNil(resp.Engines[i].LayerVsVolume)
	}
	writeJSON(c, s.logger, http.StatusOK, resp)
}

// nonNil makes an absent list an empty one: lists are [] on the wire,
// never null (docs/output.md), so clients need no null check.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
