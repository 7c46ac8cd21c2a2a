// Package containerd measures engines that are containerd itself, as on a
// Kubernetes node, through containerd's own gRPC API: it reports the
// snapshotter and where it keeps its data, imports the probe image into
// containerd's content store (never pulled), runs the long-lived probe task
// on the configured snapshotter, executes fio in it with task exec, and
// sweeps what layerprobe created, found by label.
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
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	contentapi "github.com/containerd/containerd/api/services/content/v1"
	diffapi "github.com/containerd/containerd/api/services/diff/v1"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	introspectionapi "github.com/containerd/containerd/api/services/introspection/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"github.com/containerd/errdefs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

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

	// runtimeName is the runtime of the probe's task: runc through its
	// v2 shim, containerd's default.
	runtimeName = "io.containerd.runc.v2"
	// maxMsgSize is containerd's own bound on a gRPC message, both ways.
	maxMsgSize = 16 << 20
)

// The gRPC metadata keys that scope a call to a namespace and put what it
// creates under a lease (containerd's own names).
const (
	namespaceHeader = "containerd-namespace"
	leaseHeader     = "containerd-lease"
)

// Client talks to one containerd.
type Client struct {
	name        string
	address     string // socket path
	namespace   string
	snapshotter string
	conn        *grpc.ClientConn
	containers  containersapi.ContainersClient
	content     contentapi.ContentClient
	diff        diffapi.DiffClient
	events      eventsapi.EventsClient
	images      imagesapi.ImagesClient
	intro       introspectionapi.IntrospectionClient
	leases      leasesapi.LeasesClient
	snapshots   snapshotsapi.SnapshotsClient
	tasks       tasksapi.TasksClient
	version     versionapi.VersionClient
	logger      *slog.Logger
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
	if err := validNamespace(namespace); err != nil {
		return nil, fmt.Errorf("containerd client for engine %s: %w", name, err)
	}
	bo := backoff.DefaultConfig
	bo.MaxDelay = 3 * time.Second
	conn, err := grpc.NewClient("unix://"+address,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMsgSize),
			grpc.MaxCallSendMsgSize(maxMsgSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("containerd client for engine %s: %w", name, err)
	}
	// containerd's services, called directly: its client library would
	// link a container runtime's worth of code into the agent for the
	// dozen calls a probe needs (docs/benchmarks.md, footprint).
	c := &Client{
		name: name, address: address, namespace: namespace, snapshotter: snapshotter,
		conn:       conn,
		containers: containersapi.NewContainersClient(conn),
		content:    contentapi.NewContentClient(conn),
		diff:       diffapi.NewDiffClient(conn),
		events:     eventsapi.NewEventsClient(conn),
		images:     imagesapi.NewImagesClient(conn),
		intro:      introspectionapi.NewIntrospectionClient(conn),
		leases:     leasesapi.NewLeasesClient(conn),
		snapshots:  snapshotsapi.NewSnapshotsClient(conn),
		tasks:      tasksapi.NewTasksClient(conn),
		version:    versionapi.NewVersionClient(conn),
		logger:     logger.With("engine", name), fsName: hostfs.FSName,
	}
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
		err = c.conn.Close()
	})
	return err
}

// ns puts the client's namespace on ctx: every containerd call is scoped
// to it, and nothing outside it is ever looked at.
func (c *Client) ns(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, namespaceHeader, c.namespace)
}

// withLease puts what the calls on the returned context create under the
// lease id, which keeps it from containerd's garbage collector.
func withLease(ctx context.Context, id string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, leaseHeader, id)
}

// namespaceRE is containerd's rule for an identifier: alphanumeric parts
// joined by single '.', '_' or '-'.
var namespaceRE = regexp.MustCompile(`^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$`)

func validNamespace(ns string) error {
	if len(ns) > 76 || !namespaceRE.MatchString(ns) {
		return fmt.Errorf("namespace %q is not a valid containerd identifier (letters and digits joined by '.', '_' or '-', at most 76 characters): %w",
			ns, errdefs.ErrInvalidArgument)
	}
	return nil
}

// native turns a gRPC error into one errdefs' predicates (IsNotFound, ...)
// recognize, with containerd's own message; other errors pass unchanged.
func native(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	cls, ok := errorClasses[st.Code()]
	if !ok {
		return err
	}
	return &rpcError{msg: st.Message(), cls: cls, err: err}
}

// errorClasses are the gRPC codes containerd answers with and what they
// mean.
var errorClasses = map[codes.Code]error{
	codes.NotFound:           errdefs.ErrNotFound,
	codes.AlreadyExists:      errdefs.ErrAlreadyExists,
	codes.InvalidArgument:    errdefs.ErrInvalidArgument,
	codes.FailedPrecondition: errdefs.ErrFailedPrecondition,
	codes.Unavailable:        errdefs.ErrUnavailable,
	codes.Unimplemented:      errdefs.ErrNotImplemented,
	codes.DeadlineExceeded:   context.DeadlineExceeded,
	codes.Canceled:           context.Canceled,
}

// rpcError is a gRPC error of a known class: its text is containerd's
// message, and errors.Is finds both the class and the gRPC status.
type rpcError struct {
	msg string
	cls error
	err error
}

func (e *rpcError) Error() string {
	if e.msg == "" {
		return e.cls.Error()
	}
	return e.msg
}

func (e *rpcError) Unwrap() []error { return []error{e.cls, e.err} }

// GRPCStatus keeps status.Code working on the error.
func (e *rpcError) GRPCStatus() *status.Status { s, _ := status.FromError(e.err); return s }

// asUnreachable returns an unreachable error when err means containerd
// could not be reached, else nil.
func (c *Client) asUnreachable(err error) error {
	if err == nil {
		return nil
	}
	var u *engine.UnreachableError
	if errors.As(err, &u) {
		return u
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), status.Code(err) == codes.DeadlineExceeded:
		return &engine.UnreachableError{Runtime: "containerd", Endpoint: c.Endpoint(), Cause: "no answer before the deadline", Err: err}
	case errors.Is(err, context.Canceled):
		return nil
	case errdefs.IsUnavailable(err), status.Code(err) == codes.Unavailable:
		return &engine.UnreachableError{Runtime: "containerd", Endpoint: c.Endpoint(), Cause: c.dialCause(), Err: err}
	}
	return nil
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
func (c *Client) fail(op string, err error) error {
	if u := c.asUnreachable(err); u != nil {
		return fmt.Errorf("%s: %w", op, u)
	}
	return fmt.Errorf("%s on engine %s: %w", op, c.name, err)
}

var _ engine.Client = (*Client)(nil)
