package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var errNoSocket = errors.New("dial unix /run/x.sock: no such file")

// Every client maps the same errors the same way; only what counts as "no
// connection" is the client's.
func TestReachUnreachable(t *testing.T) {
	r := Reach{Name: "node", Runtime: "containerd", Endpoint: "unix:///run/x.sock",
		NoConnection: func(err error) bool { return errors.Is(err, errNoSocket) },
		Cause:        func(error) string { return "no such socket" }}
	for _, tc := range []struct {
		err   error
		cause string // "" = not unreachable
	}{
		{nil, ""},
		{fmt.Errorf("list: %w", errNoSocket), "no such socket"},
		{fmt.Errorf("list: %w", context.DeadlineExceeded), "no answer before the deadline"},
		{fmt.Errorf("list: %w", context.Canceled), ""},
		{errors.New("image not found"), ""},
		{fmt.Errorf("again: %w", &UnreachableError{Runtime: "containerd", Endpoint: "e", Cause: "earlier"}), "earlier"},
	} {
		got := r.Unreachable(tc.err)
		if tc.cause == "" {
			if got != nil {
				t.Errorf("Unreachable(%v) = %v, want nil", tc.err, got)
			}
			continue
		}
		var u *UnreachableError
		if !errors.As(got, &u) || u.Cause != tc.cause || !errors.Is(got, ErrUnreachable) {
			t.Errorf("Unreachable(%v) = %v, want cause %q", tc.err, got, tc.cause)
		}
	}
	if err := r.Fail("list containers", errNoSocket); !errors.Is(err, ErrUnreachable) ||
		err.Error() != "list containers: cannot reach containerd at unix:///run/x.sock: no such socket" {
		t.Errorf("Fail of an unreachable engine = %v", err)
	}
	other := errors.New("boom")
	if err := r.Fail("list containers", other); !errors.Is(err, other) || errors.Is(err, ErrUnreachable) ||
		!strings.Contains(err.Error(), "on engine node") {
		t.Errorf("Fail of another error = %v", err)
	}
}

func TestSweepOwners(t *testing.T) {
	alive := func(owner string) bool { return owner == "me" || owner == "peer" }
	labels := func(owner, engine string) map[string]string {
		return map[string]string{LabelOwner: owner, LabelEngine: engine}
	}
	dead := DeadOwner(alive)
	if dead(labels("me", "a")) || dead(labels("peer", "a")) || !dead(labels("gone", "a")) || !dead(map[string]string{}) {
		t.Error("DeadOwner removes a live owner's objects or keeps a dead one's")
	}
	if all := DeadOwner(nil); !all(labels("me", "a")) {
		t.Error("DeadOwner(nil) keeps something")
	}
	stale := StaleOwner(alive, "me", "a")
	if !stale(labels("me", "a")) || stale(labels("me", "b")) || stale(labels("peer", "a")) || !stale(labels("gone", "b")) {
		t.Error("StaleOwner: want this process's objects of engine a and dead owners' removed, nothing else")
	}
	if StaleOwner(alive, "", "")(labels("", "")) != true {
		t.Error("an object without an owner is not a live owner's")
	}
}
