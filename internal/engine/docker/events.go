package docker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// ContainerChurn counts container start, stop and removal events since the
// given time, ignoring layerprobe's own containers. Starting or stopping a
// container syncs the whole data-root file system (moby#47630), so a round
// measured right after churn would measure that sync; the agent skips then.
//
// It asks for past events only (since..now), so the call returns at once
// instead of streaming.
func (c *Client) ContainerChurn(ctx context.Context, since time.Time) (int, error) {
	if runtime, apiVersion := c.runtimeInfo(); runtime == engine.RuntimePodman {
		return c.podmanChurn(ctx, since, apiVersion)
	}
	now := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res := c.api.Events(ctx, client.EventsListOptions{
		Since: strconv.FormatInt(since.Unix(), 10),
		Until: strconv.FormatInt(now.Unix()+1, 10),
		Filters: make(client.Filters).Add("type", "container").
			Add("event", "start").Add("event", "die").Add("event", "destroy"),
	})
	n := 0
	for {
		select {
		case m, ok := <-res.Messages:
			if !ok {
				return n, nil
			}
			if m.Actor.Attributes[engine.LabelManaged] == "true" {
				continue
			}
			n++
		case err, ok := <-res.Err:
			if !ok || err == nil || errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, c.fail("list container events", err)
		}
	}
}

// podmanEvents are Podman's own names for a container's start, stop and
// removal: its compatible API filters on these ("died", "remove"), though
// it reports them as Docker's ("die", "destroy").
var podmanEvents = []string{"start", "died", "remove"}

// podmanChurn is ContainerChurn for Podman 4, whose compatible events
// endpoint answers a bounded query (until) with almost nothing; its own
// stream=false parameter returns the past events and ends the answer.
func (c *Client) podmanChurn(ctx context.Context, since time.Time, apiVersion string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	filters, _ := json.Marshal(map[string][]string{"type": {"container"}, "event": podmanEvents})
	resp, err := c.rawGet(ctx, apiVersion, "/events", url.Values{
		"since":   {strconv.FormatInt(since.Unix(), 10)},
		"stream":  {"false"},
		"filters": {string(filters)},
	})
	if err != nil {
		return 0, c.fail("list container events", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	n := 0
	for {
		var m struct {
			Actor struct{ Attributes map[string]string }
		}
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, c.fail("list container events", err)
		}
		if m.Actor.Attributes[engine.LabelManaged] != "true" {
			n++
		}
	}
}
