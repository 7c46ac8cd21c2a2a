package enginetest

import (
	"context"
	"os/exec"
	"testing"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// TestFioOutputParses keeps the fake's output readable by the real parser:
// a fake that fio.Parse refused would test nothing.
func TestFioOutputParses(t *testing.T) {
	prof, err := fio.LookupProfile("smoke")
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range prof.Jobs {
		fast := fio.Parse(job, FioOutput(job.Workload, 1), nil, 0)
		slow := fio.Parse(job, FioOutput(job.Workload, 2), nil, 0)
		if !fast.OK() || !slow.OK() {
			t.Fatalf("%s: %+v / %+v", job.Workload, fast.Failure, slow.Failure)
		}
		for _, m := range measure.MetricsFor(job.Workload) {
			f, s := measure.MetricValue(m, fast), measure.MetricValue(m, slow)
			if !(f > 0) || !(s > 0) {
				t.Errorf("%s %s: %v, %v; want positive figures", job.Workload, m, f, s)
			}
			if measure.MetricDirection(m) == measure.MetricDirection(measure.MetricIOPS) && !(s < f) ||
				measure.MetricDirection(m) != measure.MetricDirection(measure.MetricIOPS) && !(s > f) {
				t.Errorf("%s %s: fast %v, slow %v; want the slow job worse", job.Workload, m, f, s)
			}
		}
	}
}

func TestFakeFio(t *testing.T) {
	bin := FakeFio(t)
	v, err := fio.Version(context.Background(), bin)
	if err != nil || v != FioVersion {
		t.Fatalf("Version = %q, %v", v, err)
	}
	prof, _ := fio.LookupProfile("smoke")
	job := prof.Jobs[2]
	out, err := exec.Command(bin, fio.Command(bin, job, t.TempDir(), fio.Steady, 0)[1:]...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if r := fio.Parse(job, out, nil, 0); !r.OK() || r.Workload != measure.Fsync || !(r.Sync.LatencyP99Sec > 0) {
		t.Errorf("fake fio job: %+v", r)
	}
}
