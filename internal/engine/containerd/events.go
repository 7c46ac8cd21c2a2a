package containerd

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/protobuf/encoding/protowire"
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
	stream, err := w.c.events.Subscribe(ctx, &eventsapi.SubscribeRequest{Filters: filters})
	if err != nil {
		return native(err)
	}
	envs, errs := make(chan *types.Envelope), make(chan error, 1)
	go func() {
		for {
			env, err := stream.Recv()
			if err != nil {
				errs <- native(err)
				return
			}
			select {
			case envs <- env:
			case <-ctx.Done():
				return
			}
		}
	}()
	first := true
	for {
		select {
		case env := <-envs:
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

// taskEvent is what a task event (TaskStart, TaskExit, TaskDelete) says of
// whose process it is: the container, and the exec ("" or the container's
// ID for its task's own process).
type taskEvent struct {
	topic       string
	containerID string
	execID      string
}

// Field numbers in containerd's task events (api/events/task.proto).
var taskEventFields = map[string]struct{ containerID, execID protowire.Number }{
	"containerd.events.TaskStart":  {1, 0},
	"containerd.events.TaskExit":   {1, 2},
	"containerd.events.TaskDelete": {1, 5},
}

// decodeTaskEvent reads the task event an envelope carries, by the name in
// its type URL; ok is false for any other event or one that does not
// parse. The two string fields are read off the wire: the generated event
// types would link a second protobuf runtime (gogo's, through typeurl).
func decodeTaskEvent(env *types.Envelope) (e taskEvent, ok bool) {
	name := env.GetEvent().GetTypeUrl()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	fields, ok := taskEventFields[name]
	if !ok {
		return e, false
	}
	e.topic = name
	b := env.GetEvent().GetValue()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return e, false
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == fields.containerID || num == fields.execID) {
			v, n := protowire.ConsumeString(b)
			if n < 0 {
				return e, false
			}
			if num == fields.containerID {
				e.containerID = v
			} else {
				e.execID = v
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return e, false
		}
		b = b[n:]
	}
	return e, true
}

// record keeps the time of a start or stop of someone else's container;
// layerprobe's own probes and the exits of exec'd processes do not count.
func (w *churnWatch) record(env *types.Envelope) {
	e, ok := decodeTaskEvent(env)
	if !ok {
		return
	}
	id := e.containerID
	switch e.topic {
	case "containerd.events.TaskExit":
		if e.execID != e.containerID {
			return // an exec'd process, not the container
		}
	case "containerd.events.TaskDelete":
		if e.execID != "" && e.execID != e.containerID {
			return
		}
	}
	if strings.HasPrefix(id, probeIDPrefix) {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.times = append(w.times, env.GetTimestamp().AsTime())
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
