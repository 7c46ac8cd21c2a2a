// Package containerd measures engines that are containerd itself, as on a
// Kubernetes node, through containerd's v2 client: it reports the
// snapshotter and where it keeps its data, imports the probe image into
// containerd's content store (never pulled), runs the long-lived probe task
// on the configured snapshotter with containerd's default spec and seccomp
// profile, executes fio in it with task exec, and sweeps what layerprobe
// created, found by label.
//
// It speaks the types of package engine (Info, ProbeSpec, Probe, ...), so a
// probe session runs the same on either kind of engine. containerd has no
// named volumes: a probe here has none, and the volume target is skipped.
package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	ctd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/identifiers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/hostfs"
)

// Defaults for an engine of type containerd.
const (
	// DefaultAddress is containerd's socket on a node.
	DefaultAddress = "/run/containerd/containerd.sock"
	// DefaultNamespace is the namespace the kubelet's containers live in:
	// measuring there measures the snapshotter the node's pods use.
	DefaultNamespace = "k8s.io"
	// DefaultSnapshotter is containerd's default snapshotter.
	DefaultSnapshotter = "overlayfs"
)

// Client talks to one containerd.
type Client struct {
	name        string
	address     string // socket path
	namespace   string
	snapshotter string
	api         *ctd.Client
	logger      *slog.Logger
	reach       engine.Reach
	fsName      func(path string) (string, error)

	churn *churnWatch

	closeOnce sync.Once
}

// New returns a client for the containerd engine configured as name.
// address is the socket, as a path or a unix:// URL ("" = DefaultAddress);
// namespace "" is DefaultNamespace, snapshotter "" DefaultSnapshotter. The
// connection is made lazily, so a containerd that is down now is reported
// by the first call, as with a Docker engine.
func New(name, address, namespace, snapshotter string, logger *slog.Logger) (*Client, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	address = strings.TrimPrefix(address, "unix://")
	if address == "" {
		address = DefaultAddress
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if snapshotter == "" {
		snapshotter = DefaultSnapshotter
	}
	if err := identifiers.Validate(namespace); err != nil {
		return nil, fmt.Errorf("containerd client for engine %s: %w", name, err)
	}
	// An explicit runtime (runc through its v2 shim, containerd's own
	// default): without one the client asks the namespace's labels for
	// it, one more call in every container creation and task deletion.
	api, err := ctd.New(address,
		ctd.WithDefaultNamespace(namespace),
		ctd.WithDefaultRuntime(defaults.DefaultRuntime),
		// Reconnect within 3 s of containerd's return, not the client's 10
		// (the longest wait between two attempts to connect).
		ctd.WithTimeout(3*time.Second))
	if err != nil {
		return nil, fmt.Errorf("containerd client for engine %s: %w", name, err)
	}
	c := &Client{
		name: name, address: address, namespace: namespace, snapshotter: snapshotter,
		api: api, logger: logger.With("engine", name), fsName: hostfs.FSName,
	}
	c.reach = engine.Reach{Name: name, Runtime: "containerd", Endpoint: c.Endpoint(),
		NoConnection: errdefs.IsUnavailable, Cause: func(error) string { return c.dialCause() }}
	c.churn = newChurnWatch(c)
	return c, nil
}

// Endpoint is containerd's address, unix:///run/containerd/containerd.sock.
func (c *Client) Endpoint() string { return "unix://" + c.address }

// Namespace is the containerd namespace the client works in.
func (c *Client) Namespace() string { return c.namespace }

// Close stops watching events and releases the connection.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.churn.stop()
		err = c.api.Close()
	})
	return err
}

// ns puts the client's namespace on ctx: every containerd call is scoped
// to it, and nothing outside it is ever looked at. The client adds it to
// each request anyway; the spec's defaults read it from ctx (the cgroup
// path /<namespace>/<id>).
func (c *Client) ns(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, c.namespace)
}

// dialCause dials the socket once to name why containerd cannot be
// reached: gRPC's own message is a paragraph.
func (c *Client) dialCause() string {
	conn, err := net.DialTimeout("unix", c.address, 2*time.Second)
	if err == nil {
		conn.Close()
		return "the socket accepts connections but containerd does not answer"
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, syscall.ENOENT):
		return "no such socket (is containerd running?)"
	case errors.Is(err, os.ErrPermission):
		return "permission denied"
	case errors.As(err, &errno):
		return errno.Error()
	}
	return err.Error()
}

// fail wraps err with the operation's name; a containerd that cannot be
// reached is reported as such, in one line.
func (c *Client) fail(op string, err error) error { return c.reach.Fail(op, err) }

var _ engine.Client = (*Client)(nil)
