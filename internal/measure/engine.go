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
}
