package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// TestAgentTableRunningCycle: a running cycle's line says where it
// stands: the job, rounds done, bytes written and the estimated end.
func TestAgentTableRunningCycle(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	end := t0.Add(90 * time.Second)
	a := Agent{URL: "http://127.0.0.1:9811",
		Overhead: api.OverheadResponse{GeneratedAt: t0, Confidence: 0.95},
		Engines:  []api.Engine{{Name: "default", Reachable: true}},
		Cycles: []api.Cycle{{ID: 12, Engine: "default", Mode: measure.ModeSteady, Result: "running", Trigger: "api", StartedAt: t0,
			Running: &api.CycleProgress{Phase: "measure", Workload: measure.RandWrite, RoundsDone: 7, BytesWritten: 320 << 20,
				EstimatedEnd: &end, UpdatedAt: t0}}}}
	var buf bytes.Buffer
	if err := WriteAgentTable(&buf, a); err != nil {
		t.Fatal(err)
	}
	if want := "cycle 12, running at 2026-12-02T12:00:00Z, api; now measure on randwrite, 7 rounds done, 320.0 MiB written, ends about 12:01:30 UTC"; !strings.Contains(buf.String(), want) {
		t.Errorf("want %q in:\n%s", want, buf.String())
	}
}
