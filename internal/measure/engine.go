package measure

// EngineFacts are what layerprobe knows of a measured engine: what the
// engine says of itself and what the probe found. The run report, the REST
// API and the metrics all carry this one type (its JSON names are part of
// docs/output.md and api/openapi.yaml).
type EngineFacts struct {
	Runtime       string `json:"runtime"` // docker, podman (its Docker-compatible API) or containerd
	EngineVersion string `json:"engine_version"`
	Driver        string `json:"driver"` // storage driver, or containerd's snapshotter
	DriverClass   string `json:"driver_class"`
	BackingFS     string `json:"backing_fs"`
	DataRoot      string `json:"data_root"`
	ImageStore    string `json:"image_store"`
	Rootless      bool   `json:"rootless"`
	FioVersion    string `json:"fio_version"`
	// HostArmCgroup is "joined" when the host arm's fio runs in the probe
	// container's CPU cgroups, "outside" when it cannot (CPU contention on
	// a busy host then reads as overhead; HostArmCgroupError says why), ""
	// when not known (before the probe container has started).
	HostArmCgroup      string `json:"host_arm_cgroup"`
	HostArmCgroupError string `json:"host_arm_cgroup_error,omitempty"`
	TopologyFacts
}

// TopologyFacts say where the engine runs relative to layerprobe and so
// what every ratio is against (package topology): "host" (the engine's
// data root is on this host; ratios against a host directory on the same
// file system) or "vm" (Docker Desktop, Lima, Colima, OrbStack, Podman
// machine: ratios against the host's native disk, bind through the VM's
// file sharing). Empty before the engine has been prepared.
type TopologyFacts struct {
	Topology string `json:"topology,omitempty"`
	// VM is the product the engine runs in when known (docker-desktop,
	// lima, colima, orbstack, rancher-desktop, podman-machine).
	VM string `json:"vm,omitempty"`
	// Share is the VM's file sharing the bind target goes through (9p,
	// virtiofs, sshfs, grpcfuse), as the probe container's mount table
	// names it. VM topology only.
	Share string `json:"share,omitempty"`
	// Baseline says what every ratio is against: "native host disk" in a
	// VM, the data root's file system on the host.
	Baseline string `json:"baseline,omitempty"`
	// HostFioVersion is the host arm's fio when it differs from the probe
	// image's (FioVersion): in a VM the image may carry the VM's fio.
	HostFioVersion string `json:"host_fio_version,omitempty"`
}
