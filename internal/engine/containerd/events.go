package containerd

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
)

// churnKeep is how long container events are remembered: longer than any
// sensible agent.churn_quiet_period.
const churnKeep = time.Hour

// churnTopics are the events that mean a container started or stopped:
// each one syncs the file system of the snapshotter's root.
var churnTopics = []string{
	`topic=="/tasks/start"`,
	`topic=="/tasks/exit"`,
	`topic=="/tasks/delete"`,
}

// churnWatch remembers when containers of the namespace started and
// stopped. containerd keeps no event history (Docker's /events does), so
// the client subscribes from the start and counts itself.
type churnWatch struct {
	c      *Client
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	times     []time.Time
	connected bool
	since     time.Time // when the current subscription started
	lastErr   error
}

func newChurnWatch(c *Client) *churnWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &churnWatch{c: c, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

func (w *churnWatch) stop() {
	w.cancel()
	<-w.done
}

// run subscribes, and subscribes again after containerd went away.
func (w *churnWatch) run(ctx context.Context) {
	defer close(w.done)
	delay := time.Second
	for ctx.Err() == nil {
		err := w.subscribe(ctx)
		w.mu.Lock()
		w.connected, w.lastErr = false, err
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func (w *churnWatch) subscribe(ctx context.Context) error {
	ctx, cancel := context.WithCancel(w.c.ns(ctx))
	defer cancel()
	filters := make([]string, len(churnTopics))
	for i, t := range churnTopics {
		filters[i] = "namespace==" + w.c.namespace + "," + t
	}
	envs, errs := w.c.api.Subscribe(ctx, filters...)
	first := true
	for {
		select {
		case env, ok := <-envs:
			if !ok {
				return errors.New("event stream ended")
			}
			w.record(env)
		case err := <-errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if first {
			// No error within a second (or an event): the stream is up.
			w.mu.Lock()
			if !w.connected {
				w.connected, w.since, w.lastErr = true, time.Now(), nil
			}
			w.mu.Unlock()
			first = false
		}
	}
}

// churnOf says whose container an event started or stopped; ok is false
// for any other event, and for the exit of an exec'd process.
func churnOf(env *events.Envelope) (containerID string, ok bool) {
	if env == nil || env.Event == nil {
		return "", false
	}
	v, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		return "", false
	}
	switch e := v.(type) {
	case *apievents.TaskStart:
		return e.ContainerID, true
	case *apievents.TaskExit:
		// An exec's exit names the exec; the task's own names the
		// container.
		return e.ContainerID, e.ID == e.ContainerID
	case *apievents.TaskDelete:
		return e.ContainerID, e.ID == "" || e.ID == e.ContainerID
	}
	return "", false
}

// record keeps the time of a start or stop of someone else's container;
// layerprobe's own probes and the exits of exec'd processes do not count.
func (w *churnWatch) record(env *events.Envelope) {
	id, ok := churnOf(env)
	if !ok || strings.HasPrefix(id, probeIDPrefix) {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.times = append(w.times, env.Timestamp)
	cut := 0
	for cut < len(w.times) && now.Sub(w.times[cut]) > churnKeep {
		cut++
	}
	w.times = w.times[cut:]
}

// ContainerChurn counts container start and stop events since the given
// time, ignoring layerprobe's own probes. Starting or stopping a container
// syncs the whole file system, so a round measured right after churn would
// measure that sync; the agent skips then. While the event subscription is
// down the count is an error, so the guard does not take silence for calm.
func (c *Client) ContainerChurn(_ context.Context, since time.Time) (int, error) {
	w := c.churn
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.connected {
		if w.lastErr != nil {
			return 0, c.fail("watch container events", w.lastErr)
		}
		return 0, errors.New("watch container events on engine " + c.name + ": not subscribed yet")
	}
	n := 0
	for _, t := range w.times {
		if !t.Before(since) {
			n++
		}
	}
	return n, nil
}
