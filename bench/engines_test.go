//go:build bench

package bench

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/report"
)

func overheadAt(pct, low, high float64) measure.Overhead {
	return measure.Overhead{Ratio: 100/pct - 1, PercentOfHost: pct, PercentLow: low, PercentHigh: high, N: 10, Coverage: 0.96}
}

// TestUnitEngineFill: a run's document becomes an engine's figures, and an
// engine error or a failed exit is recorded next to what was measured.
func TestUnitEngineFill(t *testing.T) {
	start := time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC)
	reflink := true
	cost := 0.002
	doc := &report.Run{StartedAt: start, DurationSeconds: 300, BytesWritten: 2 << 30, Engines: []report.Engine{{
		EngineFacts: measure.EngineFacts{Runtime: "docker", Driver: "overlay2", BackingFS: "xfs"}, Rounds: 40, StopReason: "bytes",
		Results: []measure.Result{{Target: measure.TargetContainer, Workload: measure.Fsync,
			Overhead: map[string]measure.Overhead{measure.MetricFsyncP99: overheadAt(96, 89, 123)}}},
		Cold: &report.Cold{Results: []measure.Result{{Target: measure.TargetContainer, Workload: measure.Fsync,
			Overhead: map[string]measure.Overhead{measure.MetricFsyncP99: overheadAt(80, 60, 110)}}},
			CopyUp: measure.CopyUp{Reflink: &reflink, CostSecondsPerMiB: &cost,
				Sizes: []measure.CopyUpSize{{SizeBytes: 1 << 20, Rounds: 6, HostSeconds: 0.0005, ContainerSeconds: 0.0036}}}},
		Error: &report.Error{Code: "cold", Message: "the cold image could not be imported"},
	}}}
	var er engineRun
	er.fill(lpOutput{doc: doc, recorded: []string{"run", "--mode", "both"}, stderr: "last lines", exitErr: errors.New("exit status 1")}, "storage:\n  driver: overlay2\n")
	if er.Steady == nil || er.Steady.Rounds != 40 || er.Steady.StopReason != "bytes" {
		t.Fatalf("steady part not kept: %+v", er.Steady)
	}
	if er.Steady.Config != "storage:\n  driver: overlay2\n" || len(er.Steady.Args) != 3 {
		t.Errorf("the run's config and arguments not recorded: %q, %q", er.Steady.Config, er.Steady.Args)
	}
	if o, ok := er.Steady.reported("container", "fsync"); !ok || o.PercentOfHost != 96 {
		t.Errorf("container fsync = %+v, %v; want 96%% of host", o, ok)
	}
	if o, ok := er.Cold.coldFsync(); !ok || o.PercentOfHost != 80 {
		t.Errorf("cold fsync = %+v, %v; want 80%% of host", o, ok)
	}
	for _, want := range []string{"engine error cold: the cold image could not be imported", "exit status 1", "last lines"} {
		if !strings.Contains(er.Error, want) {
			t.Errorf("error %q lacks %q", er.Error, want)
		}
	}
	if !strings.Contains(er.Table, "96% [89–123]") {
		t.Errorf("the printed table lacks the container's fsync:\n%s", er.Table)
	}
	if er.Driver != "overlay2" || er.BackingFS != "xfs" || er.BytesWritten != 2<<30 || er.Seconds != 300 {
		t.Errorf("engine facts not kept: %+v", er)
	}

	var clean engineRun
	doc.Engines[0].Error = nil
	clean.fill(lpOutput{doc: doc}, "")
	if clean.Error != "" {
		t.Errorf("a clean run records error %q", clean.Error)
	}
}

// TestUnitEnginesReport: the section shows each engine's intervals as
// `layerprobe run` prints them, n/a where a run measured nothing, and why
// it failed.
func TestUnitEnginesReport(t *testing.T) {
	reflink := false
	cost := 0.00205
	slope := 0.04
	ok := engineRun{Name: "overlay2-ext4", Label: "Docker, overlay2 on ext4", BytesWritten: 2 << 30, Seconds: 150,
		Steady: &runDoc{StartedAt: time.Date(2026, 11, 27, 19, 30, 0, 0, time.UTC), Rounds: 39, StopReason: "bytes",
			Reported: map[string]measure.Overhead{"container/fsync": overheadAt(96, 89, 123), "bind/fsync": overheadAt(101, 97, 104),
				"container/randwrite": overheadAt(86, 57, 123), "container/smallfiles": overheadAt(83, 50, 118),
				"bind/smallfiles": overheadAt(87, 58, 108), "volume/smallfiles": overheadAt(106, 81, 203)}},
		Cold: &coldDoc{Results: []measure.Result{{Target: measure.TargetContainer, Workload: measure.Fsync,
			Overhead: map[string]measure.Overhead{measure.MetricFsyncP99: overheadAt(99, 92, 137)}}},
			CopyUp: measure.CopyUp{Reflink: &reflink, CostSecondsPerMiB: &cost, Sizes: []measure.CopyUpSize{
				{SizeBytes: 1 << 20, Rounds: 6, HostSeconds: 0.00042, ContainerSeconds: 0.0036},
				{SizeBytes: 64 << 20, Rounds: 6, HostSeconds: 0.00031, ContainerSeconds: 0.132}}},
			Lookup: []measure.LookupSummary{
				{Op: measure.LookupWalk, Rounds: 6, HostSeconds: 0.0139, ContainerSeconds: 0.027, ExtraSeconds: 0.0131, ExtraCILow: 0.0109, ExtraCIHigh: 0.0162},
				{Op: measure.LookupDirCreate, Rounds: 6, HostSeconds: 0.00003, ContainerSeconds: 0.00005, ExtraSeconds: 0.00002, ExtraCILow: math.NaN(), ExtraCIHigh: math.NaN(), Withheld: true}},
		},
		Startup: &measure.Startup{Sizes: []measure.StartupSize{
			{ImageBytes: 10 << 20, Rounds: 6, Seconds: 0.35, DeviceBytes: 3 << 20},
			{ImageBytes: 100 << 20, Rounds: 6, Seconds: 0.341, DeviceBytes: 12 << 20}}, BytesPerImageByte: &slope}}
	ok.Table = "layerprobe devel: profile quick\n  TARGET  JOB\n"
	failed := engineRun{Name: "podman-overlay", Label: "Podman, overlay on ext4", Error: "podman: no socket\nafter 30 s"}
	w := &mdWriter{}
	writeEngines(w, &results{Engines: []engineRun{ok, failed}})
	md := w.String()
	for _, want := range []string{
		"| Docker, overlay2 on ext4 | 96% [89–123] | 86% [57–123] | n/a | 83% [50–118] · 87% [58–108] · 106% [81–203] | 101% [97–104] | 39, bytes; 2.00 GiB in",
		"| Docker, overlay2 on ext4 | 0.35 / 0.34 s (10 / 100 MiB) | 3 / 12 MiB | 0.04 B per image byte | +13.1 ms [+10.9 ms, +16.2 ms] (host 13.9 ms) | +0.020 ms (host 30.0 µs) |",
		"| Podman, overlay on ext4 | n/a | n/a | n/a | n/a | n/a |\n",
		"| Docker, overlay2 on ext4 | 99% [92–137] | 420 µs / 3.60 ms | 310 µs / 132 ms | 2.05 ms | no |",
		"| Podman, overlay on ext4 | n/a | n/a | n/a | n/a · n/a · n/a | n/a | – |",
		"| Podman, overlay on ext4 | n/a | n/a | n/a | n/a | n/a |",
		"- Podman, overlay on ext4: podman: no socket after 30 s",
		"27 Nov 19:30–19:32 UTC",
		"Docker, overlay2 on ext4, as `layerprobe run --mode both` printed it:\n\n```\nlayerprobe devel: profile quick\n  TARGET  JOB\n```",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Count(md, "```\n") != 2 {
		t.Errorf("want one printed table (the failed run has none):\n%s", md)
	}

	// A fitted slope a hair below zero is no slope: 0.00, not -0.00.
	tiny := -0.0004
	if _, _, s := startupCells(&measure.Startup{Sizes: []measure.StartupSize{{ImageBytes: 10 << 20, Rounds: 3, Seconds: 0.4}},
		BytesPerImageByte: &tiny}); s != "0.00 B per image byte" {
		t.Errorf("slope %q, want 0.00 B per image byte", s)
	}

	w = &mdWriter{}
	writeEngines(w, &results{})
	if !strings.Contains(w.String(), "Not measured in this run.") {
		t.Errorf("an empty section says:\n%s", w.String())
	}
}
