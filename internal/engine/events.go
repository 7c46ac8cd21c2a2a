package engine

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/moby/moby/client"
)

// ContainerChurn counts container start, stop and removal events since the
// given time, ignoring layerprobe's own containers. Starting or stopping a
// container syncs the whole data-root file system (moby#47630), so a round
// measured right after churn would measure that sync; the agent skips then.
//
// It asks for past events only (since..now), so the call returns at once
// instead of streaming.
func (c *Client) ContainerChurn(ctx context.Context, since time.Time) (int, error) {
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
			if m.Actor.Attributes[LabelManaged] == "true" {
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
