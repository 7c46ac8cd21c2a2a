//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// resultsVersion is the version of results.json's layout. Version 2: the
// earlier method's runs next to the adaptive method's, per driver; runs
// kept as runDoc (executions without latency histograms). Version 3: the
// reference is a list of runs (references); a version 2 file's single
// reference reads as a list of one.
const resultsVersion = 3

// results is everything one benchmark run measured: raw figures only, so
// that the report and its plots can be regenerated from the file alone.
type results struct {
	Version    int       `json:"version"`
	Short      bool      `json:"short"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Machine    machine   `json:"machine"`
	// Sizes are the run's sizes and its section selection; the report
	// says when they are smaller than a full `make bench`.
	Sizes *runSizes `json:"sizes,omitempty"`
	// SectionSeconds is the wall time of each section.
	SectionSeconds map[string]float64 `json:"section_seconds"`
	// Reruns are sections measured again into this file after the run
	// (BENCH_ONLY), each replacing that section's figures.
	Reruns []rerun `json:"reruns,omitempty"`
	// Errors are sections or steps that failed, "section: message"; the
	// report lists them.
	Errors []string `json:"errors,omitempty"`
	// OldRev is the earlier revision the old method's figures come from,
	// OldVersion its `layerprobe version`.
	OldRev     string           `json:"old_rev,omitempty"`
	OldVersion string           `json:"old_version,omitempty"`
	Drivers    []driverResult   `json:"drivers,omitempty"`
	Detection  *detectionResult `json:"detection,omitempty"`
	// Footprint is bench/footprint.go's footprintResult, kept as it was
	// written so this file does not depend on its layout.
	Footprint json.RawMessage `json:"footprint,omitempty"`
	// Engines is one default run per engine and storage driver.
	Engines []engineRun `json:"engines,omitempty"`
	// Install is the package-install cross-check per Docker driver.
	Install []installRun `json:"install,omitempty"`
	// Fleet is one Prometheus over generated fleets (bench/fleet.go).
	Fleet *fleetResults `json:"fleet,omitempty"`
	// CgroupV2 is the shipped deployments in a cgroup v2 guest under load
	// (bench/cgroupv2.go), a pass per revision: this tree's ("fix") and
	// the one before the join from a private cgroup namespace.
	CgroupV2 []*cgroupV2Pass `json:"cgroupv2,omitempty"`
	// Carried are sections copied unchanged from an earlier results file
	// instead of being measured in this run; the report says so.
	Carried []carried `json:"carried,omitempty"`
}

// setCgroupV2 keeps pass in place of an earlier pass of its label.
// cgroupV2Pass is the recorded pass of that label, or nil.
func (r *results) cgroupV2Pass(label string) *cgroupV2Pass {
	for _, p := range r.CgroupV2 {
		if p.Label == label {
			return p
		}
	}
	return nil
}

func (r *results) setCgroupV2(pass *cgroupV2Pass) {
	if pass == nil {
		return
	}
	r.CgroupV2 = slices.DeleteFunc(r.CgroupV2, func(p *cgroupV2Pass) bool { return p.Label == pass.Label })
	r.CgroupV2 = append(r.CgroupV2, pass)
	slices.SortFunc(r.CgroupV2, func(a, b *cgroupV2Pass) int { return strings.Compare(b.Label, a.Label) })
}

// carried is one section taken over from an earlier run's results.
type carried struct {
	Section string `json:"section"`
	// From is when the earlier run started; Note says which run and why.
	From time.Time `json:"from"`
	Note string    `json:"note"`
}

// carriedOf returns the record of a section carried over, or nil.
func (r *results) carriedOf(section string) *carried {
	for i := range r.Carried {
		if r.Carried[i].Section == section {
			return &r.Carried[i]
		}
	}
	return nil
}

// runSizes are the environment's sizes (BENCH_COVERAGE_RUNS and so on).
type runSizes struct {
	CoverageRuns      map[string]int `json:"coverage_runs"`
	OldDefaultRuns    int            `json:"old_default_runs"`
	UnperturbedCycles int            `json:"unperturbed_cycles"`
	// ReferenceRuns is the runs per driver's reference; 0 in the runs
	// made when the reference was one run.
	ReferenceRuns int `json:"reference_runs,omitempty"`
	// Only is BENCH_ONLY, empty for every section.
	Only []string `json:"only,omitempty"`
	// Settings are the other variables that chose what was measured
	// (recordedSettings), as they were set; absent from earlier runs.
	Settings map[string]string `json:"settings,omitempty"`
}

// rerun is one BENCH_ONLY run that replaced some sections.
type rerun struct {
	Sections   []string  `json:"sections"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Sizes is the rerun's command; Why is BENCH_RERUN_WHY, what made
	// it necessary, in words for the report.
	Sizes *runSizes `json:"sizes,omitempty"`
	Why   string    `json:"why,omitempty"`
	// Resumed: BENCH_RESUME kept the sections' runs and added to them.
	Resumed bool `json:"resumed,omitempty"`
}

// driverResult is what one storage driver's sections measured.
type driverResult struct {
	Driver string `json:"driver"`
	// OldRounds is the earlier method's default profile with many rounds
	// (targets container and bind): its first k rounds are what k rounds
	// of it give. OldDefaults are runs of it at its default settings.
	OldRounds   *runDoc  `json:"old_rounds,omitempty"`
	OldDefaults []runDoc `json:"old_defaults,omitempty"`
	// Unbounded is the adaptive method with a precision it cannot reach
	// and a large budget (targets container and bind): its first k rounds
	// of a workload are what a run stopped there gives.
	Unbounded *runDoc `json:"unbounded,omitempty"`
	// References are runs of the long profile: the default's workloads with
	// 5 s executions (seqwrite: a 256 MiB file written once), every workload
	// on files of its own per round, the independent reference. Several
	// runs, so that what stays fixed within one run (its files' places,
	// the disk's state in its minutes) shows as spread between them
	// instead of being taken for the truth (referenceOf).
	References []runDoc `json:"references,omitempty"`
	// Reference is a version 2 file's single reference run; readResults
	// moves it into References.
	Reference *runDoc `json:"reference,omitempty"`
	// Defaults are runs of the adaptive method at its default settings.
	Defaults []runDoc `json:"defaults,omitempty"`
}

// driver returns the driver's entry, adding it when missing.
func (r *results) driver(name string) *driverResult {
	for i := range r.Drivers {
		if r.Drivers[i].Driver == name {
			return &r.Drivers[i]
		}
	}
	r.Drivers = append(r.Drivers, driverResult{Driver: name})
	slices.SortFunc(r.Drivers, func(a, b driverResult) int { return strings.Compare(b.Driver, a.Driver) }) // overlay2 first
	return r.driver(name)
}

// forget removes a section's errors, wall time and carried-over note (its
// figures are reset by the section itself) before it runs again, also those
// recorded where it ran together with another section
// ("reference-btrfs+defaults-btrfs").
func (r *results) forget(section string) {
	names := func(key string) bool { return slices.Contains(strings.Split(key, "+"), section) }
	r.Carried = slices.DeleteFunc(r.Carried, func(c carried) bool { return names(c.Section) })
	r.Errors = slices.DeleteFunc(r.Errors, func(e string) bool {
		key, _, _ := strings.Cut(e, ": ")
		return names(key)
	})
	maps.DeleteFunc(r.SectionSeconds, func(key string, _ float64) bool { return names(key) })
}

// machine describes where the figures were measured.
type machine struct {
	Hostname   string `json:"hostname"`
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemTotal   string `json:"mem_total"`
	Kernel     string `json:"kernel"`
	OS         string `json:"os"`
	Disk       string `json:"disk"`
	RootFS     string `json:"root_fs"`
	Fio        string `json:"fio"`
	Dockerd    string `json:"dockerd"`
	Go         string `json:"go"`
	Layerprobe string `json:"layerprobe"`
	LoadAvg    string `json:"load_avg_at_start"`
	IOPressure string `json:"io_pressure_at_start"`
}

// detectionResult is the detection section.
type detectionResult struct {
	Driver      string `json:"driver"`
	Profile     string `json:"profile"`
	AgentConfig string `json:"agent_config"`
	// The agent's window and cycle cap when the section ran (defaults
	// then; 0 in results from before they were recorded: see
	// detectionResult.window and cycleCap).
	WindowRounds  int   `json:"window_rounds,omitempty"`
	CycleMaxBytes int64 `json:"cycle_max_bytes,omitempty"`
	// LearnCycles ran until the detector of every target screened;
	// CountedCycles follow and are the ones the false-alarm count is over.
	LearnCycles   int         `json:"learn_cycles"`
	CountedCycles int         `json:"counted_cycles"`
	Unperturbed   agentSeries `json:"unperturbed"`
	// Calibration: short `layerprobe run`s under candidate IOPS limits.
	CalibrationArgs []string     `json:"calibration_args"`
	Calibration     []calibPoint `json:"calibration"`
	// CapCycles is how many throttled measurement cycles a level gets.
	CapCycles int           `json:"cap_cycles"`
	Levels    []levelResult `json:"levels"`
}

// calibPoint is one calibration run.
type calibPoint struct {
	WriteIOPS uint64  `json:"write_iops"`
	Run       *runDoc `json:"run"`
}

// levelResult is one injected slowdown.
type levelResult struct {
	Nominal   float64 `json:"nominal"` // the slowdown aimed at, e.g. 2 for 2x
	WriteIOPS uint64  `json:"write_iops"`
	// Predicted is the calibration's estimate of the slowdown at
	// WriteIOPS (0 when it could not tell).
	Predicted float64     `json:"predicted"`
	Series    agentSeries `json:"series"`
	// FlaggedAfter is the number of measurement cycles (confirmation
	// cycles not counted) after which layerprobe_fsync_regression
	// {target="container"} was 1; 0 = not flagged within CapCycles.
	FlaggedAfter   int     `json:"flagged_after"`
	SecondsToFlag  float64 `json:"seconds_to_flag,omitempty"`
	AgentStartedAt string  `json:"agent_started_at"`
}

// agentSeries is what one agent process did, cycle by cycle.
type agentSeries struct {
	Cycles []cycleObs `json:"cycles"`
	Rounds []roundObs `json:"rounds"`
	Events []eventObs `json:"events"`
}

// cycleObs is one cycle as the agent recorded it, and what /metrics said
// once the cycle (and its confirmation cycle, if any) was over.
type cycleObs struct {
	ID      int64  `json:"id"`
	Trigger string `json:"trigger"` // api (a measurement cycle) or confirm
	// Index numbers the measurement cycles of the series, from 1; the
	// confirmation cycle carries the index of the cycle that raised it.
	Index           int     `json:"index"`
	Phase           string  `json:"phase"` // learn, counted, throttled
	Result          string  `json:"result"`
	Reason          string  `json:"reason,omitempty"`
	StopReason      string  `json:"stop_reason,omitempty"`
	StartedAt       string  `json:"started_at"`
	DurationSeconds float64 `json:"duration_seconds"`
	Rounds          int     `json:"rounds"`
	BytesWritten    int64   `json:"bytes_written"`
	// Regression is layerprobe_fsync_regression per target after the
	// measurement cycle and its confirmation (on measurement cycles only).
	Regression map[string]float64 `json:"regression,omitempty"`
	// Published is the headline overhead per "target/workload" the agent
	// published after the cycle, over its window of recent rounds, with
	// its interval.
	Published map[string]measure.Overhead `json:"published,omitempty"`
}

// roundObs is one round of one target and workload: the headline figure of the
// target and of the host in the same round.
type roundObs struct {
	CycleID  int64   `json:"cycle_id"`
	Round    int     `json:"round"`
	Target   string  `json:"target"`
	Workload string  `json:"workload"`
	Metric   string  `json:"metric"`
	Host     float64 `json:"host"`
	Value    float64 `json:"value"`
}

// eventObs is one detector event the agent logged.
type eventObs struct {
	Time    string   `json:"time"`
	Event   string   `json:"event"` // suspected, confirmed, recovered
	Targets []string `json:"targets"`
}

func writeResults(path string, r *results) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	// Through a temporary file: a checkpoint written while the run goes on
	// must never leave half a file behind.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

func readResults(path string) (*results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	switch r.Version {
	case resultsVersion:
	case 2:
		for i := range r.Drivers {
			if dr := &r.Drivers[i]; dr.Reference != nil {
				dr.References, dr.Reference = []runDoc{*dr.Reference}, nil
			}
		}
		r.Version = resultsVersion
	default:
		return nil, fmt.Errorf("%s: results version %d, want %d (or 2)", path, r.Version, resultsVersion)
	}
	return &r, nil
}

// Before 4 Dec 2026 a detection section did not record the agent's window
// and cycle cap: they were the defaults then.
const (
	legacyWindowRounds  = 48
	legacyCycleMaxBytes = 512 << 20
)

// window is the agent's window (agent.window_rounds) the section ran with.
func (d *detectionResult) window() int {
	if d.WindowRounds > 0 {
		return d.WindowRounds
	}
	return legacyWindowRounds
}

// cycleCap is the agent's cycle byte cap the section ran with.
func (d *detectionResult) cycleCap() int64 {
	if d.CycleMaxBytes > 0 {
		return d.CycleMaxBytes
	}
	return legacyCycleMaxBytes
}
