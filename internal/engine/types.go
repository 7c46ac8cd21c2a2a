package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// Labels set on every container, volume and image layerprobe creates. The
// sweep finds leftovers by these labels, never by name.
const (
	LabelManaged = "io.layerprobe.managed" // "true"
	LabelOwner   = "io.layerprobe.owner"   // owner token of the creating process (hostfs.OwnerToken)
	LabelRole    = "io.layerprobe.role"    // "probe" (container, volume) or "image"
	LabelEngine  = "io.layerprobe.engine"  // configured engine name
	LabelMode    = "io.layerprobe.mode"    // "steady" or "cold"
	LabelDigest  = "io.layerprobe.digest"  // content digest of the probe image's root file system
)

// Paths inside the probe container.
const (
	ContainerFio    = "/lp/bin/fio"        // fio, copied from the host with its libraries
	ContainerHelper = "/lp/bin/layerprobe" // this program, for idle / kill-fio / clean helpers
	ContainerLayer  = "/lp/layer"          // directory in the writable layer
	ContainerBind   = "/lp/bind"           // bind mount of the host scratch directory
	ContainerVolume = "/lp/volume"         // the named volume
)

// Runtimes: the engine behind the Docker API, or containerd.
const (
	RuntimeDocker = "docker"
	RuntimePodman = "podman" // Podman's Docker-compatible API (podman system service)
	// RuntimeContainerd is containerd through its own API (package
	// containerd), not through the Docker API.
	RuntimeContainerd = "containerd"
)

// DriverClass says how layerprobe treats a storage driver.
type DriverClass string

// Driver classes.
const (
	DriverSupported  DriverClass = "supported"  // overlay2, overlayfs, btrfs, zfs, vfs, native, fuse-overlayfs; Podman's overlay
	DriverDeprecated DriverClass = "deprecated" // devicemapper, aufs: measured, with a warning
	DriverUnknown    DriverClass = "unknown"    // anything else: measured, with a warning
)

// Info is what layerprobe needs to know about an engine.
type Info struct {
	Name          string      `json:"name"`     // configured engine name
	Endpoint      string      `json:"endpoint"` // the socket / URL used
	Runtime       string      `json:"runtime"`  // RuntimeDocker, RuntimePodman or RuntimeContainerd
	ServerVersion string      `json:"engine_version"`
	APIVersion    string      `json:"api_version"`
	Driver        string      `json:"driver"` // storage driver, or containerd's snapshotter
	DriverClass   DriverClass `json:"driver_class"`
	DriverNote    string      `json:"driver_note,omitempty"` // human note for deprecated / unknown drivers
	BackingFS     string      `json:"backing_fs"`            // e.g. extfs, xfs, btrfs, zfs, tmpfs
	// Zpool and ZFSDataset are the zfs driver's pool and parent dataset
	// (DriverStatus "Zpool", "Parent Dataset"): every layer is a dataset
	// <ZFSDataset>/<id> of its own, so only the pool says which device
	// the layers write to. Empty for other drivers.
	Zpool         string `json:"zpool,omitempty"`
	ZFSDataset    string `json:"zfs_dataset,omitempty"`
	DataRoot      string `json:"data_root"`
	ImageStore    string `json:"image_store"` // "graphdriver" or "containerd"
	Rootless      bool   `json:"rootless"`
	KernelVersion string `json:"kernel_version"`
	// Hostname is the engine's host name (docker info's Name): a VM's
	// own (lima-default, colima, docker-desktop) for an engine in a VM.
	Hostname string `json:"hostname,omitempty"`
	OS       string `json:"os"`
}

// Facts are the engine's part of measure.EngineFacts; the probe adds
// what it found (fio's version, the host arm's cgroup).
func (i Info) Facts() measure.EngineFacts {
	return measure.EngineFacts{Runtime: i.Runtime, EngineVersion: i.ServerVersion, Driver: i.Driver,
		DriverClass: string(i.DriverClass), BackingFS: i.BackingFS, DataRoot: i.DataRoot,
		ImageStore: i.ImageStore, Rootless: i.Rootless}
}

// The probe container's limits, the same on every engine. They bound what
// a misbehaving job can take from the host; fio's built-in profiles need
// far less, and fio and the helper keep a few dozen files open.
const (
	ProbePidsLimit   = 64
	ProbeMemoryBytes = 512 << 20
	ProbeNoFile      = 1024
)

// ProbeSpec describes the probe container to start.
type ProbeSpec struct {
	Engine     string            // engine name, for the label
	Image      string            // image reference (ID or name) to run
	BindSource string            // host directory bind-mounted at ContainerBind
	Owner      string            // owner token, for the label
	Mode       measure.Mode      // the mode label
	Labels     map[string]string // extra labels
	// WritableLayerOnly starts the container without the bind mount and
	// the named volume: the cold probe measures only a fresh container's
	// writable layer, and a volume per cold round would be needless churn.
	WritableLayerOnly bool
	// Rootless says the engine runs rootless: the container's root is an
	// ordinary user on the host, whose process limit the kernel enforces,
	// so the probe keeps the engine's process limit (a rootless engine
	// sets the user's own).
	Rootless bool
	// DeviceWriteIOPS, when non-zero, throttles the container's writes to
	// the data root's device (cgroup blkio). Test-only: it injects a real
	// slowdown for detection tests.
	DeviceWriteIOPS uint64
	DevicePath      string // block device for DeviceWriteIOPS
	// HostCgroupNamespace starts the container in the host's cgroup
	// namespace (the engines' default on cgroup v1; Docker's on v2 is a
	// private one): an agent that runs in a private cgroup namespace
	// enters the probe's to join its CPU cgroups (package cgroup), which
	// needs no more than CAP_SYS_ADMIN, where entering PID 1's needs
	// CAP_SYS_PTRACE too.
	HostCgroupNamespace bool
	// AppArmorProfile, when set, confines the container with that
	// AppArmor profile: the agent's own, for the same reason. Opening
	// another process's namespace file is a ptrace read, which Docker's
	// and containerd's default profiles allow only towards a process of
	// the same profile.
	AppArmorProfile string
}

// Validate reports a spec no engine can start a probe from.
func (s ProbeSpec) Validate() error {
	if s.Image == "" {
		return errors.New("no image")
	}
	if !s.WritableLayerOnly && !filepath.IsAbs(s.BindSource) {
		return fmt.Errorf("bind source %q is not an absolute path", s.BindSource)
	}
	if s.DeviceWriteIOPS > 0 && s.DevicePath == "" {
		return errors.New("DeviceWriteIOPS without DevicePath")
	}
	return nil
}

// Probe is a running probe container with its named volume.
type Probe struct {
	ContainerID    string
	Name           string
	Image          string
	VolumeName     string
	VolumeHostPath string // the volume's mount point on the host
	// LayerDir is the host path writes to the writable layer land in,
	// when the driver tells it: the overlay upper directory, or the zfs
	// dataset's mount point.
	LayerDir string
	Pid      int // the container's main process, in the engine's PID namespace; 0 if unknown
}

// ExecResult is the outcome of one command run in the probe container.
type ExecResult struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// SweepReport lists what a sweep removed. Snapshots and leases are
// containerd's: a Docker engine removes a container's layer with it.
type SweepReport struct {
	Containers []string `json:"containers"`
	Volumes    []string `json:"volumes"`
	Images     []string `json:"images"`
	Snapshots  []string `json:"snapshots,omitempty"`
	Leases     []string `json:"leases,omitempty"`
}

// ClassifyDriver says how layerprobe treats a storage driver of an engine
// of the given runtime, with a note for the operator when it is not a
// supported one. The same name can mean different drivers: Podman's
// (containers/storage) "overlay" is its current overlayfs driver, Docker's
// "overlay" the legacy one that overlay2 replaced.
func ClassifyDriver(runtime, driver string) (DriverClass, string) {
	switch driver {
	case "overlay2", "overlayfs", "btrfs", "zfs", "vfs", "native", "fuse-overlayfs":
		return DriverSupported, ""
	case "overlay":
		if runtime == RuntimePodman {
			return DriverSupported, ""
		}
		return DriverDeprecated, "the legacy overlay driver is deprecated (removed in Docker Engine 24); results are measured but not comparable with overlay2; migrate to overlay2"
	case "devicemapper":
		return DriverDeprecated, "devicemapper is deprecated (removed in Docker Engine 25); results are measured but not comparable with overlay2; migrate to overlay2"
	case "aufs":
		return DriverDeprecated, "aufs is deprecated (removed in Docker Engine 24); results are measured but not comparable with overlay2; migrate to overlay2"
	case "":
		return DriverUnknown, "the engine reported no storage driver; results are measured but cannot be attributed to a driver"
	}
	return DriverUnknown, fmt.Sprintf("storage driver %q is not one layerprobe knows; results are measured but not known to be comparable with overlay2", driver)
}

// ImageRepository is the repository of the images EnsureImage imports; the
// tag is the first 12 hex digits of the root file system's digest.
const ImageRepository = "layerprobe-probe"

// halfStartedTimeout bounds RemoveHalfStarted.
const halfStartedTimeout = 10 * time.Second

// RemoveHalfStarted removes what a failed probe start created, through
// remove, and logs what it could not remove: the caller returns the start's
// own error. It uses a fresh context bounded by the kill timeout, because
// ctx may be what failed.
func RemoveHalfStarted(ctx context.Context, logger *slog.Logger, name string, remove func(context.Context) error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), halfStartedTimeout)
	defer cancel()
	if err := remove(cctx); err != nil {
		logger.Warn("could not remove a half-started probe", "container", name, "err", err)
	}
}
