package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/measure"
)

func TestIOPressure(t *testing.T) {
	proc := t.TempDir()
	if _, ok := ioPressure(proc); ok {
		t.Fatal("no pressure file: want ok=false (kernel without PSI)")
	}
	if err := os.MkdirAll(filepath.Join(proc, "pressure"), 0o755); err != nil {
		t.Fatal(err)
	}
	psi := "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=7.25 avg60=1.00 avg300=0.50 total=99\n"
	if err := os.WriteFile(filepath.Join(proc, "pressure", "io"), []byte(psi), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ok := ioPressure(proc)
	if !ok || p != 12.5 {
		t.Fatalf("ioPressure = %v, %v; want the some avg10 12.5", p, ok)
	}
}

func TestDiskUtil(t *testing.T) {
	sys := t.TempDir()
	dir := filepath.Join(sys, "block", "vdz")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(ticks string) {
		line := "100 0 800 50 200 0 1600 70 0 " + ticks + " 120 0 0 0 0 0 0\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1000")
	// The device becomes busy for 150 ms of io_ticks while diskUtil sleeps.
	go func() { time.Sleep(50 * time.Millisecond); write("1150") }()
	u, ok := diskUtil(context.Background(), sys, "vdz", 200*time.Millisecond)
	if !ok || u < 0.3 || u > 0.8 {
		t.Fatalf("diskUtil = %v, %v; want about 150 ms busy over a 200 ms window", u, ok)
	}
	if _, ok := diskUtil(context.Background(), sys, "missing", time.Millisecond); ok {
		t.Fatal("diskUtil of a missing device: want ok=false")
	}
}

func sample(round int, target measure.Target, job measure.Workload, fail bool) measure.Sample {
	s := measure.Sample{Round: round, Target: target, JobResult: measure.JobResult{Workload: job}}
	if fail {
		s.Failure = &measure.Failure{Reason: measure.ReasonNoSpace, Message: "full"}
	}
	return s
}

func TestCompletedRoundsAndFailures(t *testing.T) {
	var ss []measure.Sample
	for r := 1; r <= 3; r++ {
		for _, tg := range []measure.Target{"host", "container"} {
			ss = append(ss, sample(r, tg, measure.Fsync, r == 2 && tg == "container"))
		}
	}
	ss = ss[:len(ss)-1] // round 3 cut short
	if n := completedRounds(ss, 2); n != 2 {
		t.Errorf("completedRounds = %d, want 2", n)
	}
	if got := failureReasons(ss); len(got) != 1 || got[0] != "no_space x1" {
		t.Errorf("failureReasons = %v", got)
	}
}

func TestFsyncOnly(t *testing.T) {
	p, err := fio.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	q := fsyncOnly(p)
	if len(q.Jobs) != 1 || q.Jobs[0].Workload != measure.Fsync {
		t.Fatalf("fsyncOnly jobs = %+v", q.Jobs)
	}
	if len(p.Jobs) != len(measure.Workloads) {
		t.Fatal("fsyncOnly changed the original profile")
	}
}
