package metrics

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// contract is the series docs/metrics.md documents, copied by hand on
// purpose: dashboards and alert rules depend on these names and label
// sets, so a rename in the code must fail here and be a deliberate
// decision, not a refactoring.
var contract = []contractEntry{
	{"layerprobe_overhead_ratio", dto.MetricType_GAUGE, "driver,engine,metric,mode,target,workload"},
	{"layerprobe_overhead_ci_low_ratio", dto.MetricType_GAUGE, "driver,engine,metric,mode,target,workload"},
	{"layerprobe_overhead_ci_high_ratio", dto.MetricType_GAUGE, "driver,engine,metric,mode,target,workload"},
	{"layerprobe_iops", dto.MetricType_GAUGE, "driver,engine,mode,op,target,workload"},
	{"layerprobe_bandwidth_bytes_per_second", dto.MetricType_GAUGE, "driver,engine,mode,op,target,workload"},
	{"layerprobe_latency_seconds", dto.MetricType_GAUGE, "driver,engine,mode,op,percentile,target,workload"},
	{"layerprobe_fsync_regression", dto.MetricType_GAUGE, "driver,engine,target"},
	{"layerprobe_cycles_total", dto.MetricType_COUNTER, "engine,mode,result"},
	{"layerprobe_cycle_skips_total", dto.MetricType_COUNTER, "engine,reason"},
	{"layerprobe_cycle_duration_seconds", dto.MetricType_GAUGE, "engine,mode"},
	{"layerprobe_last_success_timestamp_seconds", dto.MetricType_GAUGE, "engine,mode"},
	{"layerprobe_written_bytes_total", dto.MetricType_COUNTER, "engine,target"},
	{"layerprobe_engine_info", dto.MetricType_GAUGE, "backing_fs,data_root,driver,engine,engine_version,fio_version,runtime"},
	{"layerprobe_host_arm_cgroup_joined", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_engine_up", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_daily_budget_bytes", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_budget_used_bytes", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_build_info", dto.MetricType_GAUGE, "branch,goarch,goos,goversion,revision,tags,version"},
	{"layerprobe_metrics_detail", dto.MetricType_GAUGE, ""},
	// The cold probe (results labelled steady or cold).
	{"layerprobe_copyup_latency_seconds", dto.MetricType_GAUGE, "driver,engine,size_bytes,target"},
	{"layerprobe_copyup_cost_seconds_per_byte", dto.MetricType_GAUGE, "driver,engine"},
	{"layerprobe_backing_fs_reflink", dto.MetricType_GAUGE, "backing_fs,engine"},
	{"layerprobe_startup_seconds", dto.MetricType_GAUGE, "driver,engine,image_bytes"},
	{"layerprobe_startup_device_written_bytes", dto.MetricType_GAUGE, "driver,engine,image_bytes"},
	{"layerprobe_startup_seconds_per_byte", dto.MetricType_GAUGE, "driver,engine"},
	{"layerprobe_startup_written_bytes_per_image_byte", dto.MetricType_GAUGE, "driver,engine"},
	{"layerprobe_lookup_seconds", dto.MetricType_GAUGE, "driver,engine,lookup,target"},
	{"layerprobe_lookup_extra_seconds", dto.MetricType_GAUGE, "driver,engine,lookup"},
	{"layerprobe_lookup_extra_ci_low_seconds", dto.MetricType_GAUGE, "driver,engine,lookup"},
	{"layerprobe_lookup_extra_ci_high_seconds", dto.MetricType_GAUGE, "driver,engine,lookup"},
	// The layer-write advisor: per-container series for the top containers
	// only, the rest summed as container="_other".
	{"layerprobe_container_layer_written_bytes", dto.MetricType_GAUGE, "container,engine,image"},
	{"layerprobe_container_block_written_bytes_total", dto.MetricType_COUNTER, "container,engine,image"},
	{"layerprobe_container_database_in_layer", dto.MetricType_GAUGE, "container,database,engine,image"},
	{"layerprobe_databases_in_layer", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_containers", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_advisor_pass_duration_seconds", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_advisor_pass_cpu_seconds", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_advisor_pass_read_bytes", dto.MetricType_GAUGE, "engine"},
	{"layerprobe_advisor_last_pass_timestamp_seconds", dto.MetricType_GAUGE, "engine"},
}

type contractEntry struct {
	name   string
	typ    dto.MetricType
	labels string // label names, sorted, comma-separated
}

// Label values docs/metrics.md fixes; a series outside these sets would break
// dashboards that select on them.
var contractValues = map[string][]string{
	"target":     {"host", "container", "bind", "volume"},
	"workload":   {"seqwrite", "randwrite", "fsync", "smallfiles"},
	"op":         {"read", "write", "sync"},
	"metric":     {"iops", "bandwidth", "latency_p50", "latency_p99", "fsync_p99"},
	"percentile": {"50", "99", "99.9"},
	"result":     {"ok", "failed", "skipped", "interrupted"},
	"mode":       {"steady", "cold"},
	"size_bytes": {"1048576", "16777216", "67108864"},
	// The start-up images of the agent's default configuration.
	"image_bytes": {"10485760", "104857600", "524288000"},
	"runtime":     {"docker", "podman", "containerd"},
	"lookup":      {"walk", "dir_create"},
}

func TestDesignContract(t *testing.T) {
	srv := httptest.NewServer(Handler(NewRegistry(staticSource{fullSnapshot()}, true), nil))
	defer srv.Close()
	mfs := parse(t, scrape(t, srv.URL))

	for _, c := range contract {
		mf := mfs[c.name]
		if mf == nil || len(mf.GetMetric()) == 0 {
			t.Errorf("%s: missing from the scrape", c.name)
			continue
		}
		if mf.GetType() != c.typ {
			t.Errorf("%s: type %v, want %v", c.name, mf.GetType(), c.typ)
		}
		help := mf.GetHelp()
		if !strings.Contains(help, "Cached from the last completed measurement cycle") && !strings.Contains(help, "Cached from the last advisor pass") &&
			c.name != "layerprobe_build_info" && c.name != "layerprobe_metrics_detail" {
			t.Errorf("%s: HELP does not say the value is cached: %q", c.name, mf.GetHelp())
		}
		for _, m := range mf.GetMetric() {
			var names []string
			for _, lp := range m.GetLabel() {
				names = append(names, lp.GetName())
				if allowed, ok := contractValues[lp.GetName()]; ok && !slices.Contains(allowed, lp.GetValue()) {
					t.Errorf("%s: %s=%q is not one of %v", c.name, lp.GetName(), lp.GetValue(), allowed)
				}
			}
			slices.Sort(names)
			if got := strings.Join(names, ","); got != c.labels {
				t.Errorf("%s: labels {%s}, want {%s}", c.name, got, c.labels)
			}
			if m.TimestampMs != nil {
				t.Errorf("%s: sample carries a timestamp; cached values must not (it breaks staleness handling)", c.name)
			}
		}
	}

	// Nothing unlisted under our prefix: a new series must be added to the
	// contract (and to docs/metrics.md) on purpose.
	for name := range mfs {
		if !strings.HasPrefix(name, "layerprobe_") {
			continue
		}
		if !slices.ContainsFunc(contract, func(c contractEntry) bool { return c.name == name }) {
			t.Errorf("%s: exported but not in the contract list", name)
		}
	}
}
