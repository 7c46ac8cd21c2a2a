package containerd

import (
	"testing"
	"time"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
)

// A container's start, its task's exit and its deletion are churn; an
// exec's exit and deletion, and other events, are not.
func TestChurnOf(t *testing.T) {
	for _, tc := range []struct {
		event any
		id    string
		ok    bool
	}{
		{&apievents.TaskStart{ContainerID: "c1", Pid: 42}, "c1", true},
		{&apievents.TaskExit{ContainerID: "c1", ID: "c1", Pid: 42, ExitStatus: 137}, "c1", true},
		{&apievents.TaskExit{ContainerID: "c1", ID: "exec-7", Pid: 9}, "c1", false},
		{&apievents.TaskDelete{ContainerID: "c2", ID: "c2", Pid: 3}, "c2", true},
		{&apievents.TaskDelete{ContainerID: "c2", Pid: 3}, "c2", true},
		{&apievents.TaskDelete{ContainerID: "c2", ID: "exec-1", Pid: 3}, "c2", false},
		{&apievents.TaskOOM{ContainerID: "c1"}, "", false},
	} {
		a, err := typeurl.MarshalAny(tc.event)
		if err != nil {
			t.Fatal(err)
		}
		id, ok := churnOf(&events.Envelope{Timestamp: time.Now(), Event: a})
		if id != tc.id || ok != tc.ok {
			t.Errorf("churnOf(%T %+v) = %q, %v; want %q, %v", tc.event, tc.event, id, ok, tc.id, tc.ok)
		}
	}
	if _, ok := churnOf(nil); ok {
		t.Error("no envelope is churn")
	}
}
