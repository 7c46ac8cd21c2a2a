package httpapi

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// Limits of GET /api/v1/cycles?limit=.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// engineNameRE is the syntax of a configured engine name; it repeats
// config's rule so that a malformed name is refused here, before any lookup.
var engineNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// paramError is a request parameter the client got wrong; it becomes a 400
// bad_parameter whose message is Error().
type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }

func badParam(format string, args ...any) error {
	return &paramError{msg: fmt.Sprintf(format, args...)}
}

// quote shows a client-supplied value in an error message, cut short so an
// enormous query cannot make an enormous answer.
func quote(s string) string {
	const maxQuoted = 64
	if len(s) > maxQuoted {
		// Cut on a rune boundary so %q shows text, not broken bytes.
		cut := maxQuoted
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// parseQuery parses a raw query string and refuses any parameter not in
// allowed, and any allowed parameter given more than once: a typo such as
// ?limt=5 must not silently return the default.
func parseQuery(raw string, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badParam("malformed query string: %v", err)
	}
	var unknown []string
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, quote(k))
			continue
		}
		if len(vs) > 1 {
			return nil, badParam("query parameter %q is given %d times; give it at most once", k, len(vs))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		accepts := "this route takes no query parameters"
		if len(allowed) > 0 {
			accepts = "this route accepts: " + strings.Join(allowed, ", ")
		}
		noun := "parameter"
		if len(unknown) > 1 {
			noun = "parameters"
		}
		return nil, badParam("unknown query %s %s (%s)", noun, strings.Join(unknown, ", "), accepts)
	}
	return q, nil
}

// parseMode validates a query whose only parameter is an optional mode
// (steady or cold); "" means not given.
func parseMode(raw string) (measure.Mode, error) {
	q, err := parseQuery(raw, "mode")
	if err != nil {
		return "", err
	}
	vs, ok := q["mode"]
	if !ok {
		return "", nil
	}
	mode := measure.Mode(vs[0])
	if !slices.Contains(measure.Modes, mode) {
		return "", badParam("invalid value %s for query parameter \"mode\": must be steady or cold", quote(vs[0]))
	}
	return mode, nil
}

// parseCycleQuery validates the query of GET /api/v1/cycles. now anchors a
// relative since (a duration).
func parseCycleQuery(raw string, now time.Time) (CycleQuery, error) {
	q, err := parseQuery(raw, "limit", "since", "engine")
	if err != nil {
		return CycleQuery{}, err
	}
	cq := CycleQuery{Limit: DefaultLimit}
	if vs, ok := q["limit"]; ok {
		if cq.Limit, err = parseLimit(vs[0]); err != nil {
			return CycleQuery{}, err
		}
	}
	if vs, ok := q["since"]; ok {
		if cq.Since, err = parseSince(vs[0], now); err != nil {
			return CycleQuery{}, err
		}
	}
	if cq.Engine, err = parseEngine(q); err != nil {
		return CycleQuery{}, err
	}
	return cq, nil
}

// parseEngineQuery validates a query whose only parameter is an optional
// engine name; "" means not given.
func parseEngineQuery(raw string) (string, error) {
	q, err := parseQuery(raw, "engine")
	if err != nil {
		return "", err
	}
	return parseEngine(q)
}

// parseEngine validates an optional engine parameter; "" means not given.
func parseEngine(q url.Values) (string, error) {
	vs, ok := q["engine"]
	if !ok {
		return "", nil
	}
	if !engineNameRE.MatchString(vs[0]) {
		return "", badParam("invalid value %s for query parameter \"engine\": must be an engine name matching %s", quote(vs[0]), engineNameRE)
	}
	return vs[0], nil
}

func parseLimit(s string) (int, error) {
	// Digits only: strconv.Atoi would also take "+5" and "-0".
	n, err := strconv.Atoi(s)
	if err != nil || s == "" || strings.TrimLeft(s, "0123456789") != "" || n < 1 || n > MaxLimit {
		return 0, badParam("invalid value %s for query parameter \"limit\": must be an integer from 1 to %d (default %d)", quote(s), MaxLimit, DefaultLimit)
	}
	return n, nil
}

// parseSince reads an RFC 3339 timestamp or a positive Go duration, which
// means that long before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, badParam("invalid value %s for query parameter \"since\": a duration must be positive, e.g. 24h", quote(s))
		}
		return now.Add(-d), nil
	}
	hint := ""
	switch {
	case strings.Contains(s, " "):
		// A literal '+' in a query string decodes to a space.
		hint = "; encode '+' in a time zone offset as %2B"
	case strings.HasSuffix(s, "d") || strings.HasSuffix(s, "w"):
		hint = "; durations have no days, use hours (168h is a week)"
	}
	return time.Time{}, badParam("invalid value %s for query parameter \"since\": must be an RFC 3339 timestamp (2025-01-02T15:04:05Z) or a duration before now (24h, 90m)%s", quote(s), hint)
}

// parseID validates the {id} of GET /api/v1/cycles/{id}.
func parseID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || strings.TrimLeft(s, "0123456789") != "" || n < 1 {
		return 0, badParam("invalid cycle id %s: must be a positive integer", quote(s))
	}
	return n, nil
}
