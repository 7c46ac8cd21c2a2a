package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"

	"github.com/layerprobe/layerprobe/internal/engine"
)

// containerdSnapshotter is DriverStatus's driver-type when the engine uses
// the containerd image store; the driver name is then a snapshotter name.
const containerdSnapshotter = "io.containerd.snapshotter.v1"

// Info pings the engine and reports what it is: versions, storage driver
// and how layerprobe treats it, backing file system, data root.
//
// An engine that cannot be reached yields an error wrapping ErrUnreachable
// whose message is one line naming the endpoint.
func (c *Client) Info(ctx context.Context) (engine.Info, error) {
	ping, err := c.api.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		if u := c.reach.Unreachable(err); u != nil {
			return engine.Info{}, u
		}
		return engine.Info{}, c.fail("ping", err)
	}
	ver, err := c.api.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return engine.Info{}, c.fail("get engine version", err)
	}
	res, err := c.api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return engine.Info{}, c.fail("get engine info", err)
	}
	si := res.Info

	info := engine.Info{
		Name:          c.name,
		Runtime:       runtimeOf(ver.Components),
		Endpoint:      c.endpoint,
		ServerVersion: firstNonEmpty(ver.Version, si.ServerVersion),
		APIVersion:    firstNonEmpty(ver.APIVersion, ping.APIVersion),
		Driver:        si.Driver,
		DataRoot:      si.DockerRootDir,
		ImageStore:    "graphdriver",
		Rootless:      slices.ContainsFunc(si.SecurityOptions, isRootlessOption),
		KernelVersion: si.KernelVersion,
		Hostname:      si.Name,
		OS:            firstNonEmpty(si.OperatingSystem, si.OSType, ver.Os),
	}
	c.setRuntime(info.Runtime, info.APIVersion)
	if info.Runtime == engine.RuntimePodman && !info.Rootless {
		// Podman 4 says it in a field of its own, not in SecurityOptions.
		info.Rootless = c.podmanRootless(ctx, info.APIVersion)
	}
	info.DriverClass, info.DriverNote = engine.ClassifyDriver(info.Runtime, si.Driver)
	if v, ok := status(si.DriverStatus, "driver-type"); ok && v == containerdSnapshotter {
		info.ImageStore = "containerd"
	}
	info.BackingFS = c.backingFS(si.Driver, si.DriverStatus, si.DockerRootDir)
	if si.Driver == "zfs" {
		info.Zpool, _ = status(si.DriverStatus, "Zpool")
		info.ZFSDataset, _ = status(si.DriverStatus, "Parent Dataset")
	}
	c.logger.Debug("engine info", "runtime", info.Runtime, "driver", info.Driver, "backing_fs", info.BackingFS,
		"image_store", info.ImageStore, "engine_version", info.ServerVersion, "api_version", info.APIVersion)
	return info, nil
}

// backingFS names the file system the writable layers live on. DriverStatus
// says it for overlay2, aufs and devicemapper (and Podman's overlay); btrfs and zfs are their own
// backing; otherwise (vfs, fuse-overlayfs, the containerd store, which
// reports no DriverStatus but a driver-type) the data root is statfs'ed,
// which is right for a local engine whose layers live under its data root.
func (c *Client) backingFS(driver string, driverStatus [][2]string, dataRoot string) string {
	if v, ok := status(driverStatus, "Backing Filesystem"); ok && v != "" {
		return v
	}
	switch driver {
	case "btrfs", "zfs":
		return driver
	}
	if dataRoot == "" {
		return "unknown"
	}
	name, err := c.fsName(dataRoot)
	if err != nil {
		c.logger.Warn("cannot tell the data root's file system", "data_root", dataRoot, "err", err)
		return "unknown"
	}
	return name
}

// runtimeOf names the engine behind the Docker API from the components
// its /version lists: Podman's compatible API names "Podman Engine".
func runtimeOf(components []system.ComponentVersion) string {
	for _, c := range components {
		if c.Name == "Podman Engine" {
			return engine.RuntimePodman
		}
	}
	return engine.RuntimeDocker
}

// status looks a key up in DriverStatus; the order of its pairs is not
// stable across engines (Podman builds it from a map).
func status(pairs [][2]string, key string) (string, bool) {
	for _, p := range pairs {
		if p[0] == key {
			return p[1], true
		}
	}
	return "", false
}

func isRootlessOption(opt string) bool {
	for f := range strings.SplitSeq(opt, ",") {
		if f == "name=rootless" {
			return true
		}
	}
	return false
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// podmanRootless reads the "Rootless" field Podman adds to its /info
// answer, which the moby client's types do not carry. Failing that, the
// engine counts as rootful: the flag only adds a warning.
func (c *Client) podmanRootless(ctx context.Context, apiVersion string) bool {
	resp, err := c.rawGet(ctx, apiVersion, "/info", nil)
	if err != nil {
		c.logger.Debug("could not ask Podman whether it runs rootless", "err", err)
		return false
	}
	defer resp.Body.Close()
	var answer struct{ Rootless bool }
	if json.NewDecoder(resp.Body).Decode(&answer) != nil {
		return false
	}
	return answer.Rootless
}

// rawGet asks the engine for what the moby client's types do not carry
// (Podman's extensions), over the client's own connection. An answer other
// than 200 is an error.
func (c *Client) rawGet(ctx context.Context, apiVersion, path string, query url.Values) (*http.Response, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return c.api.Dialer()(ctx) },
	}}
	u := url.URL{Scheme: "http", Host: "engine", Path: "/v" + apiVersion + path, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return resp, nil
}
