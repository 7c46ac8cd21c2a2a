package containerd

import (
	"testing"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The task events are read off the wire as containerd's generated types
// write them, whatever other fields they carry.
func TestDecodeTaskEvent(t *testing.T) {
	for _, tc := range []struct {
		msg  proto.Message
		want taskEvent
	}{
		{&apievents.TaskStart{ContainerID: "c1", Pid: 42}, taskEvent{"containerd.events.TaskStart", "c1", ""}},
		{&apievents.TaskExit{ContainerID: "c1", ID: "exec-7", Pid: 9, ExitStatus: 137, ExitedAt: timestamppb.Now()},
			taskEvent{"containerd.events.TaskExit", "c1", "exec-7"}},
		{&apievents.TaskDelete{ContainerID: "c2", Pid: 3, ExitStatus: 1, ExitedAt: timestamppb.Now(), ID: "c2"},
			taskEvent{"containerd.events.TaskDelete", "c2", "c2"}},
	} {
		b, err := proto.Marshal(tc.msg)
		if err != nil {
			t.Fatal(err)
		}
		name := string(proto.MessageName(tc.msg))
		for _, url := range []string{name, "type.googleapis.com/" + name} {
			got, ok := decodeTaskEvent(&types.Envelope{Event: &anypb.Any{TypeUrl: url, Value: b}})
			if !ok || got != tc.want {
				t.Errorf("decode %s: %+v, %v; want %+v", url, got, ok, tc.want)
			}
		}
	}
	b, _ := proto.Marshal(&apievents.TaskOOM{ContainerID: "c1"})
	if e, ok := decodeTaskEvent(&types.Envelope{Event: &anypb.Any{TypeUrl: "containerd.events.TaskOOM", Value: b}}); ok {
		t.Errorf("TaskOOM decoded as %+v", e)
	}
	if _, ok := decodeTaskEvent(&types.Envelope{Event: &anypb.Any{TypeUrl: "containerd.events.TaskStart", Value: []byte{0x0a, 0x05, 'a'}}}); ok {
		t.Error("a truncated event decoded")
	}
	if _, ok := decodeTaskEvent(nil); ok {
		t.Error("no envelope decoded")
	}
}
