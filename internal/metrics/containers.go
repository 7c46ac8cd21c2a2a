package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Advisor is an engine's last layer-write advisor pass. Only the top
// containers (agent's advisor.metrics_top_n, by bytes in their writable
// layer) carry series of their own; the others are summed into one series
// with container="_other", so that the number of series stays bounded
// whatever runs on the host, and a container that goes away loses its
// series with the next pass.
type Advisor struct {
	At         time.Time // when the pass ended
	Containers int       // running containers the pass saw
	// DatabasesInLayer counts the containers of known databases and
	// queues whose data directory is on no volume, top or not.
	DatabasesInLayer int
	Top              []ContainerSeries
	// RestContainers is how many containers were summed into the _other
	// series (0: no such series), RestLayerBytes their layers' bytes. Their
	// block writes have no _other series: the sum's members change from
	// pass to pass, so it can fall without any container's counter
	// resetting, which no counter may do.
	RestContainers int
	RestLayerBytes float64
	// What the pass cost this process.
	PassSeconds, PassCPUSeconds, PassReadBytes float64
}

// ContainerSeries is one top container.
type ContainerSeries struct {
	Name, Image string
	LayerBytes  float64
	BlockBytes  float64 // NaN: the cgroup could not be read
	// Database names a known database or queue with its data directory in
	// the writable layer; "" otherwise.
	Database string
}

// OtherContainers is the container and image label of the sum of the
// containers without series of their own. Docker container names start
// with a letter or digit, so no container is called that.
const OtherContainers = "_other"

// cachedPass ends the HELP text of the advisor's series.
const cachedPass = " Cached from the last advisor pass (run with every measurement cycle), not measured at scrape time."

var (
	containerLabels = []string{"engine", "container", "image"}

	descContainerLayer = prometheus.NewDesc(namespace+"_container_layer_written_bytes",
		"Bytes in the container's writable layer: what it wrote there since it was created, net of deletions (exact from a complete walk of the "+
			"driver's upper directory or the engine's SizeRw, else a lower bound). Only the top containers by this value carry their own series; "+
			"container=\"_other\" sums the rest."+cachedPass,
		containerLabels, nil)
	descContainerBlock = prometheus.NewDesc(namespace+"_container_block_written_bytes_total",
		"Block-device writes charged to the container's cgroup since it started (a new start resets it), on the data root's disk and its mounts' disks: an estimate and "+
			"an upper bound of all its writes on cgroup v2 (rewrites count every time); on cgroup v1 buffered writes flushed by the kernel are not "+
			"charged to it. Top containers only (no _other sum)."+cachedPass,
		containerLabels, nil)
	descContainerDatabase = prometheus.NewDesc(namespace+"_container_database_in_layer",
		"1 for a top container whose image is a known database or queue and whose data directory is on no volume or bind mount: its data lands "+
			"in the writable layer."+cachedPass,
		append(containerLabels[:3:3], "database"), nil)
	descDatabasesInLayer = prometheus.NewDesc(namespace+"_databases_in_layer",
		"Running containers of known databases and queues whose data directory is on no volume or bind mount, top containers or not."+cachedPass,
		[]string{"engine"}, nil)
	descContainers = prometheus.NewDesc(namespace+"_containers",
		"Running containers the last advisor pass saw (layerprobe's own probe containers left out)."+cachedPass,
		[]string{"engine"}, nil)
	descPassDuration = prometheus.NewDesc(namespace+"_advisor_pass_duration_seconds",
		"Duration in seconds of the last advisor pass over the engine."+cachedPass,
		[]string{"engine"}, nil)
	descPassCPU = prometheus.NewDesc(namespace+"_advisor_pass_cpu_seconds",
		"CPU time in seconds (user + system) this process spent during the last advisor pass over the engine."+cachedPass,
		[]string{"engine"}, nil)
	descPassRead = prometheus.NewDesc(namespace+"_advisor_pass_read_bytes",
		"Bytes this process read from block devices during the last advisor pass over the engine (/proc/self/io read_bytes)."+cachedPass,
		[]string{"engine"}, nil)
	descPassTime = prometheus.NewDesc(namespace+"_advisor_last_pass_timestamp_seconds",
		"Unix time in seconds when the last advisor pass over the engine ended; the container series are as fresh as this."+cachedPass,
		[]string{"engine"}, nil)

	advisorDescs = []*prometheus.Desc{descContainerLayer, descContainerBlock, descContainerDatabase, descDatabasesInLayer,
		descContainers, descPassDuration, descPassCPU, descPassRead, descPassTime}
)

// collectAdvisor exposes an engine's last advisor pass.
func collectAdvisor(ch chan<- prometheus.Metric, engine string, a *Advisor) {
	if a == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		emit(ch, d, prometheus.GaugeValue, v, lv...)
	}
	for _, c := range a.Top {
		gauge(descContainerLayer, c.LayerBytes, engine, c.Name, c.Image)
		// The cgroup's counter only grows while the container runs; a
		// restart makes a new cgroup, a reset that rate() handles.
		emit(ch, descContainerBlock, prometheus.CounterValue, c.BlockBytes, engine, c.Name, c.Image)
		if c.Database != "" {
			gauge(descContainerDatabase, 1, engine, c.Name, c.Image, c.Database)
		}
	}
	if a.RestContainers > 0 {
		gauge(descContainerLayer, a.RestLayerBytes, engine, OtherContainers, OtherContainers)
	}
	gauge(descDatabasesInLayer, float64(a.DatabasesInLayer), engine)
	gauge(descContainers, float64(a.Containers), engine)
	gauge(descPassDuration, a.PassSeconds, engine)
	gauge(descPassCPU, a.PassCPUSeconds, engine)
	gauge(descPassRead, a.PassReadBytes, engine)
	if !a.At.IsZero() {
		gauge(descPassTime, unixSeconds(a.At), engine)
	}
}

// lean returns a with at most n containers of its own, the others added to
// the _other sum; a itself is left alone (it belongs to a snapshot that
// concurrent scrapes read). Top is ranked already, so the first n stay.
func (a *Advisor) lean(n int) *Advisor {
	if a == nil || len(a.Top) <= n {
		return a
	}
	out := *a
	out.Top = a.Top[:n:n]
	for _, c := range a.Top[n:] {
		out.RestContainers++
		out.RestLayerBytes += c.LayerBytes
	}
	return &out
}
