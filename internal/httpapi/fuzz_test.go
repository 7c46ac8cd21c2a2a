package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
)

// FuzzQuery feeds arbitrary query strings to the parser of
// GET /api/v1/cycles and to the handler: no panic, no 5xx, and whatever is
// accepted is within the documented bounds.
func FuzzQuery(f *testing.F) {
	for _, seed := range []string{
		"", "limit=10", "limit=0", "limit=1000", "limit=1001", "limit=-1", "limit=%2B1", "limit=1e3",
		"limit=99999999999999999999", "limit=1&limit=2", "since=24h", "since=-5m", "since=0s",
		"since=2025-01-02T15:04:05Z", "since=2025-01-02T15:04:05.123456789%2B02:00", "since=2025-01-02 15:04:05",
		"since=9223372036854775807ns", "since=10000000h", "since=7d", "engine=default", "engine=A", "engine=",
		"engine=a%00b", "engine=" + string(make([]byte, 70)), "x=1", "limit", "%zz", "a=1;b=2", "limit=5&since=1h&engine=e-1_2",
		"since=%FF%FE", "engine=%E2%80%AE", "&&&", "=",
	} {
		f.Add(seed)
	}
	h := newHandler(Options{Source: newFakeSource(), Logger: slog.New(slog.DiscardHandler)}, func() time.Time { return t0 })
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseCycleQuery(raw, t0)
		var pe *paramError
		switch {
		case err != nil && !errors.As(err, &pe):
			t.Fatalf("parseCycleQuery(%q) error %v is not a parameter error", raw, err)
		case err == nil:
			if q.Limit < 1 || q.Limit > MaxLimit {
				t.Fatalf("parseCycleQuery(%q).Limit = %d", raw, q.Limit)
			}
			if q.Engine != "" && !engineNameRE.MatchString(q.Engine) {
				t.Fatalf("parseCycleQuery(%q).Engine = %q", raw, q.Engine)
			}
		}

		req := &http.Request{
			Method: http.MethodGet,
			URL:    &url.URL{Path: "/api/v1/cycles", RawQuery: raw},
			Header: http.Header{},
			Body:   http.NoBody,
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(t.Context()))
		switch {
		case err == nil && rec.Code != http.StatusOK, err != nil && rec.Code != http.StatusBadRequest:
			t.Fatalf("GET /api/v1/cycles?%s = %d (parse error %v); body %s", raw, rec.Code, err, rec.Body)
		}
		if rec.Code != http.StatusOK {
			var e api.ErrorResponse
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code != codeBadParameter || e.Error.Message == "" {
				t.Fatalf("400 body is not the error shape: %s", rec.Body)
			}
		}
	})
}
