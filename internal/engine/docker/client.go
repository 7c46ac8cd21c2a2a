// Package docker is layerprobe's only user of the Docker Engine API
// (github.com/moby/moby/client). It reports what an engine is (version,
// storage driver, backing file system, data root), imports the locally built
// probe image, runs the long-lived probe container and executes fio in it,
// and sweeps everything layerprobe created, found by label.
package docker

import (
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

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/hostfs"
)

// Client talks to one Docker engine.
type Client struct {
	name     string
	endpoint string
	api      *client.Client
	logger   *slog.Logger
	reach    engine.Reach

	// fsName names the file system of a path on this host; a field so the
	// recorded-answer tests can stand in for data roots that do not exist
	// here.
	fsName func(path string) (string, error)

	// What the last Info found: calls whose answer differs between Docker
	// and Podman ask it.
	mu         sync.Mutex
	runtime    string
	apiVersion string
}

func (c *Client) setRuntime(runtime, apiVersion string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runtime, c.apiVersion = runtime, apiVersion
}

func (c *Client) runtimeInfo() (runtime, apiVersion string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runtime, c.apiVersion
}

// New returns a client for the engine configured as name. An empty host
// means DOCKER_HOST (with DOCKER_TLS_VERIFY / DOCKER_CERT_PATH /
// DOCKER_API_VERSION) or else the default socket. The API version is
// negotiated on the first request, as the moby client does by default.
func New(name, host string, logger *slog.Logger) (*Client, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts := []client.Opt{client.WithUserAgent("layerprobe")}
	if host == "" {
		opts = append(opts, client.FromEnv)
	} else {
		opts = append(opts, client.WithHost(host))
	}
	api, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for engine %s: %w", name, err)
	}
	c := &Client{
		name:     name,
		endpoint: api.DaemonHost(),
		api:      api,
		logger:   logger.With("engine", name),
		fsName:   hostfs.FSName,
	}
	c.reach = engine.Reach{Name: name, Runtime: "Docker engine", Endpoint: c.endpoint, NoConnection: noConnection, Cause: c.dialCause}
	return c, nil
}

// Endpoint is the engine's address, e.g. unix:///var/run/docker.sock.
func (c *Client) Endpoint() string { return c.endpoint }

// Close releases the client's idle connections.
func (c *Client) Close() error { return c.api.Close() }

// noConnection tells whether err is the moby client's failure to connect.
func noConnection(err error) bool { return client.IsErrConnectionFailed(err) || isDialError(err) }

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// dialCause names why the engine cannot be reached. The moby client drops
// the reason for some failures ("connection refused" becomes a generic
// "Cannot connect to the Docker daemon"), so the socket is dialled once more
// to find it.
func (c *Client) dialCause(err error) string {
	if cause := errnoCause(err); cause != "" {
		return cause
	}
	network, addr, ok := strings.Cut(c.endpoint, "://")
	if ok && (network == "unix" || network == "tcp") {
		conn, derr := net.DialTimeout(network, addr, 2*time.Second)
		if derr == nil {
			conn.Close()
		} else if cause := errnoCause(derr); cause != "" {
			return cause
		} else {
			return firstLine(derr.Error())
		}
	}
	return firstLine(err.Error())
}

func errnoCause(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT:
			return "no such socket (is the daemon running?)"
		default:
			return errno.Error()
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	if errors.Is(err, os.ErrPermission) {
		return "permission denied"
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(s)
}

// fail wraps err with the operation's name; an engine that cannot be
// reached is reported as such, in one line.
func (c *Client) fail(op string, err error) error { return c.reach.Fail(op, err) }

// isNotFound reports a 404 from the engine (object already gone).
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

var _ engine.Client = (*Client)(nil)
