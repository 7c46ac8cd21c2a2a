package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/layerprobe/layerprobe/api"
)

// Error codes of api.ErrorBody. They are part of the API contract
// (api/openapi.yaml enumerates them): add, never rename.
const (
	codeBadParameter     = "bad_parameter"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeConflict         = "conflict"
	codeRateLimited      = "rate_limited"
	codePayloadTooLarge  = "payload_too_large"
	codeInternal         = "internal"
	codeNotReady         = "not_ready"
)

const contentTypeJSON = "application/json; charset=utf-8"

// writeJSON marshals v before writing anything, so that a value that
// cannot be encoded (a NaN in a plain float64 field) becomes a clean 500
// instead of a truncated 200.
func writeJSON(c *gin.Context, logger *slog.Logger, status int, v any) {
	body, err := encodeJSON(v)
	if err != nil {
		logger.Error("encode response", "route", c.FullPath(), "err", err)
		status = http.StatusInternalServerError
		body, _ = encodeJSON(errorBody(codeInternal, "internal error: the response could not be encoded; see the agent log"))
	}
	c.Data(status, contentTypeJSON, body)
}

// encodeJSON writes "<token>" as is rather than as \u003ctoken\u003e:
// HTML escaping protects nothing in an application/json answer served with
// nosniff, and messages are read by people with curl.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b.Bytes(), nil
}

func errorBody(code, msg string) api.ErrorResponse {
	return api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}}
}

// abortError answers the JSON error shape and stops the handler chain.
func abortError(c *gin.Context, status int, code, msg string) {
	body, _ := encodeJSON(errorBody(code, msg)) // two strings always encode
	c.Data(status, contentTypeJSON, body)
	c.Abort()
}

// sourceError translates an error of the Source into a status: this is the
// one place where agent errors meet HTTP (style §2.6).
func (s *server) sourceError(c *gin.Context, op string, err error) {
	var pe *paramError
	switch {
	case errors.As(err, &pe):
		abortError(c, http.StatusBadRequest, codeBadParameter, pe.msg)
	case errors.Is(err, ErrNotFound):
		// The Source's text is not shown: handlers that can answer 404
		// say what was missing themselves, before calling sourceError.
		abortError(c, http.StatusNotFound, codeNotFound, "not found")
	case errors.Is(err, ErrBusy):
		var be *BusyError
		var id int64
		if errors.As(err, &be) {
			id = be.CycleID
		}
		msg := "a measurement cycle is already running; try again when it has finished (GET /api/v1/cycles lists it as running)"
		if id > 0 {
			msg = fmt.Sprintf("a measurement cycle is already running (cycle %d); try again when it has finished (GET /api/v1/cycles/%d shows it)", id, id)
		}
		body, _ := encodeJSON(api.ErrorResponse{Error: api.ErrorBody{Code: codeConflict, Message: msg, CycleID: id}})
		c.Data(http.StatusConflict, contentTypeJSON, body)
		c.Abort()
	case errors.Is(err, ErrNotReady):
		abortError(c, http.StatusServiceUnavailable, codeNotReady, "the agent is not ready yet: "+err.Error())
	case errors.Is(err, context.Canceled) && c.Request.Context().Err() != nil:
		// The client went away and reads no answer. 499 is nginx's "client
		// closed request": it keeps such requests out of the 5xx counts.
		s.logger.Debug("request canceled by the client", "op", op, "err", err)
		c.AbortWithStatus(499)
	default:
		// The text may hold host paths or engine details: log it, answer
		// a generic message.
		s.logger.Error("api request failed", "op", op, "err", err)
		abortError(c, http.StatusInternalServerError, codeInternal, "internal error while "+op+"; see the agent log")
	}
}
