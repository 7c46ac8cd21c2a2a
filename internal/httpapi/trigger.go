package httpapi

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// tokenCheck holds the SHA-256 of the API token, never the token itself,
// so that neither a log line nor a heap dump of the server shows it.
type tokenCheck struct{ sum [sha256.Size]byte }

// wwwAuthenticate is the challenge of every 401 (RFC 6750 §3).
const wwwAuthenticate = `Bearer realm="layerprobe"`

// trigger is POST /api/v1/cycles: start one measurement cycle now.
//
// Security: the agent holds the Docker socket, which is root on the host.
// This handler therefore accepts no input beyond the token and one enum:
// the optional query parameter mode=steady|cold, which only chooses between
// Source.TriggerCycle and Source.TriggerColdCycle; no other parameter and no
// body field (an empty body or {} only), and neither method takes an
// argument. Nothing a client sends can reach fio options, file paths, image
// names or container configuration; the profile and targets are the
// agent's configuration.
//
// Checks run cheapest-refusal first: disabled (403), authentication (401),
// then input (400/413), then the rate limit (429), so that unauthenticated
// clients cannot use up the rate budget of the operator.
func (s *server) trigger(c *gin.Context) {
	if s.auth == nil {
		abortError(c, http.StatusForbidden, codeForbidden,
			"triggering cycles over the API is disabled: start the agent with --api-token-file=FILE (FILE holds a secret token) "+
				"and send the token as \"Authorization: Bearer <token>\"")
		return
	}
	if !s.authenticate(c) {
		return
	}
	mode, err := parseMode(c.Request.URL.RawQuery)
	if err != nil {
		abortError(c, http.StatusBadRequest, codeBadParameter, err.Error())
		return
	}
	if !emptyBody(c) {
		return
	}
	start := s.src.TriggerCycle
	if mode == measure.ModeCold {
		start = s.src.TriggerColdCycle
	}
	// One trigger at a time from the rate check to the commit, so that
	// only triggers that start a cycle use up the budget: a client that
	// polls while a cycle runs (409) is not locked out afterwards.
	// TriggerCycle returns promptly (it does not wait for the cycle).
	s.triggerMu.Lock()
	defer s.triggerMu.Unlock()
	if !s.allow(c) {
		return
	}
	resp, err := start(c.Request.Context())
	if err != nil {
		s.sourceError(c, "starting a cycle", err)
		return
	}
	s.limiter.Allow() // commit: allow saw a whole token, and only we take tokens
	s.logger.Info("measurement cycle triggered over the API", "engines", resp.Engines, "cycles", resp.CycleIDs,
		"mode", cmp.Or(mode, measure.ModeSteady), "remote_addr", c.ClientIP())
	resp.Status, resp.Engines, resp.CycleIDs = "accepted", nonNil(resp.Engines), nonNil(resp.CycleIDs)
	if resp.CycleID > 0 {
		// Poll here: the cycle is listed as running until it ends.
		c.Header("Location", "/api/v1/cycles/"+strconv.FormatInt(resp.CycleID, 10))
	}
	writeJSON(c, s.logger, http.StatusAccepted, resp)
}

// authenticate checks "Authorization: Bearer <token>" in constant time. A
// token anywhere else (query, body, cookie) is not looked at.
func (s *server) authenticate(c *gin.Context) bool {
	vals := c.Request.Header.Values("Authorization")
	if len(vals) == 0 {
		c.Header("WWW-Authenticate", wwwAuthenticate)
		abortError(c, http.StatusUnauthorized, codeUnauthorized,
			"missing \"Authorization: Bearer <token>\" header (the token is the content of the agent's --api-token-file)")
		return false
	}
	scheme, token, _ := strings.Cut(vals[0], " ")
	token = strings.TrimLeft(token, " ")
	if len(vals) > 1 || !strings.EqualFold(scheme, "Bearer") || token == "" {
		c.Header("WWW-Authenticate", wwwAuthenticate+`, error="invalid_request"`)
		abortError(c, http.StatusUnauthorized, codeUnauthorized,
			"the request must carry exactly one \"Authorization: Bearer <token>\" header")
		return false
	}
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], s.auth.sum[:]) != 1 {
		// Warn: someone holds a wrong token or is guessing. The token
		// itself is never logged.
		s.logger.Warn("API request with a wrong bearer token refused", "remote_addr", c.ClientIP(), "path", c.Request.URL.Path)
		c.Header("WWW-Authenticate", wwwAuthenticate+`, error="invalid_token"`)
		abortError(c, http.StatusUnauthorized, codeUnauthorized, "wrong bearer token")
		return false
	}
	return true
}

// emptyBody accepts no body, an empty one or the empty JSON object. Any
// field is refused by name rather than ignored, so that a client who
// believes it can choose a profile or an engine learns it cannot.
func emptyBody(c *gin.Context) bool {
	tooLarge := func() bool {
		abortError(c, http.StatusRequestEntityTooLarge, codePayloadTooLarge,
			fmt.Sprintf("request body larger than %d bytes; POST /api/v1/cycles takes an empty body or {}", MaxBodyBytes))
		return false
	}
	if c.Request.ContentLength > MaxBodyBytes {
		return tooLarge()
	}
	if c.Request.Body == nil {
		return true
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge()
	case err != nil:
		abortError(c, http.StatusBadRequest, codeBadParameter, "could not read the request body: "+err.Error())
		return false
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return true
	}
	var fields map[string]json.RawMessage
	if body[0] != '{' || json.Unmarshal(body, &fields) != nil {
		abortError(c, http.StatusBadRequest, codeBadParameter,
			"the request body must be empty or {}: POST /api/v1/cycles takes no body fields")
		return false
	}
	if len(fields) > 0 {
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, quote(k))
		}
		slices.Sort(names)
		abortError(c, http.StatusBadRequest, codeBadParameter,
			"unknown body field(s) "+strings.Join(names, ", ")+": POST /api/v1/cycles takes no body fields; "+
				"the profile, engines and targets come from the agent's configuration")
		return false
	}
	return true
}

// allow checks, without taking a token, the rate limit shared by all
// clients: the resource it protects is the host's disk, not any one
// client. It answers 429 with Retry-After when the budget is used up.
func (s *server) allow(c *gin.Context) bool {
	lim := s.limiter.Limit()
	tokens := s.limiter.Tokens()
	if lim == rate.Inf || tokens >= 1 {
		return true
	}
	retry := 3600 // a limit of 0 never refills; say "much later"
	if lim > 0 {
		retry = max(1, int(math.Ceil((1-tokens)/float64(lim))))
	}
	c.Header("Retry-After", strconv.Itoa(retry))
	abortError(c, http.StatusTooManyRequests, codeRateLimited,
		fmt.Sprintf("too many cycle triggers: at most %d in a row, then one every %s; retry in %d s",
			s.limiter.Burst(), every(lim), retry))
	return false
}

func every(l rate.Limit) string {
	if l == rate.Inf || l <= 0 {
		return "never"
	}
	return time.Duration(float64(time.Second) / float64(l)).Round(time.Millisecond).String()
}
