package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, testharness.Logger(t))
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// sample builds a successful sample with distinct figures per round and
// target, so that mix-ups show.
func sample(round, order int, target measure.Target, job measure.Workload, start time.Time) measure.Sample {
	base := float64(round*100 + order)
	r := measure.JobResult{
		Workload:     job,
		FioVersion:   "fio-3.38",
		Write:        measure.Op{IOs: 1000, IOPS: base, BandwidthBytes: base * 4096, Bytes: 4096000, LatencyMeanSec: 0.001, LatencyP50Sec: 0.0009, LatencyP99Sec: 0.002, LatencyP999Sec: 0.004},
		Read:         measure.Op{LatencyMeanSec: math.NaN(), LatencyP50Sec: math.NaN(), LatencyP99Sec: math.NaN(), LatencyP999Sec: math.NaN()},
		Sync:         measure.Op{LatencyMeanSec: math.NaN(), LatencyP50Sec: math.NaN(), LatencyP99Sec: math.NaN(), LatencyP999Sec: math.NaN()},
		Runtime:      1234567890 * time.Nanosecond,
		BytesWritten: 4096000,
	}
	if job == measure.Fsync {
		r.Sync = measure.Op{IOs: 1000, LatencyMeanSec: 0.003, LatencyP50Sec: 0.003, LatencyP99Sec: 0.01 + base/1e6, LatencyP999Sec: 0.02}
	}
	return measure.Sample{Round: round, Order: order, Target: target, StartedAt: start.Add(time.Duration(round) * time.Minute),
		DurationSeconds: 1.5, JobResult: r}
}

// roundSamples is one full round: every target, jobs fsync and seqwrite.
func roundSamples(round int, start time.Time) []measure.Sample {
	var out []measure.Sample
	for _, job := range []measure.Workload{measure.SeqWrite, measure.Fsync} {
		for i, tg := range []measure.Target{measure.TargetBind, measure.TargetHost, measure.TargetContainer} {
			out = append(out, sample(round, i+1, tg, job, start))
		}
	}
	return out
}

const perRound = 6 // samples in a roundSamples round

// finished records a cycle of engine with rounds first..first+n-1 and the
// given result.
func finished(t *testing.T, s *Store, engine string, start time.Time, first, n int, result string) Cycle {
	t.Helper()
	ctx := context.Background()
	c := &Cycle{Engine: engine, Mode: "steady", Profile: "default", Trigger: "schedule", StartedAt: start,
		Driver: "overlay2", BackingFS: "extfs", EngineVersion: "29.0.0", FioVersion: "fio-3.38"}
	if err := s.StartCycle(ctx, c); err != nil {
		t.Fatalf("StartCycle: %v", err)
	}
	c.FirstRound = first
	for r := first; r < first+n; r++ {
		c.Samples = append(c.Samples, roundSamples(r, start)...)
	}
	for _, sm := range c.Samples {
		c.BytesWritten += sm.BytesWritten
	}
	c.Rounds = n
	c.Result = result
	c.FinishedAt = start.Add(10 * time.Minute)
	if err := s.FinishCycle(ctx, c); err != nil {
		t.Fatalf("FinishCycle: %v", err)
	}
	return *c
}

// asJSON compares values that may hold NaN: the report and fio types write
// NaN as null.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

func TestCycleRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())

	c := &Cycle{Engine: "default", Mode: "steady", Profile: "default", Trigger: "api",
		Driver: "overlay2", BackingFS: "xfs", EngineVersion: "29.1.0", FioVersion: "fio-3.38",
		StartedAt: t0.Add(123456789 * time.Nanosecond)}
	if err := s.StartCycle(ctx, c); err != nil {
		t.Fatalf("StartCycle: %v", err)
	}
	if c.ID == 0 || c.Result != ResultRunning {
		t.Fatalf("after StartCycle: id %d result %q, want id set and running", c.ID, c.Result)
	}
	running, err := s.Cycle(ctx, c.ID)
	if err != nil {
		t.Fatalf("Cycle(running): %v", err)
	}
	if running.Result != ResultRunning || !running.FinishedAt.IsZero() || len(running.Samples) != 0 {
		t.Errorf("running cycle read back as %+v", running)
	}

	c.FirstRound = 7
	c.Samples = roundSamples(7, t0)
	// A latency fio did not report, a NaN duration, and a failed job.
	c.Samples[0].Write.LatencyP99Sec = math.NaN()
	c.Samples[1].DurationSeconds = math.NaN()
	failed := measure.Sample{Round: 7, Order: 3, Target: measure.TargetContainer, StartedAt: t0.Add(time.Second).In(time.FixedZone("CET", 3600)),
		DurationSeconds: 0.2, JobResult: measure.JobResult{Workload: measure.RandWrite, Failure: &measure.Failure{Reason: measure.ReasonNoSpace, Message: "ENOSPC"},
			Read: measure.Op{LatencyP99Sec: math.NaN()}, Write: measure.Op{LatencyP99Sec: math.NaN()}, Sync: measure.Op{LatencyP99Sec: math.NaN()}}}
	c.Samples = append(c.Samples, failed)
	c.Rounds, c.BytesWritten = 1, 12345
	c.Result, c.Reason, c.Message = "failed", "fio_failures", "failed fio jobs: no_space x1"
	c.FinishedAt = t0.Add(5 * time.Minute)
	c.Results = []measure.Result{
		{Target: measure.TargetHost, Workload: "fsync", RoundsOK: 1, Raw: measure.Raw{IOPS: 100, BandwidthBytes: 409600, LatencyP50: 0.001, LatencyP99: math.NaN(), FsyncP99: 0.01}},
		{Target: measure.TargetContainer, Workload: "fsync", RoundsOK: 1, RoundsFailed: 1,
			Raw:      measure.Raw{IOPS: 90, BandwidthBytes: 368640, LatencyP50: 0.0011, LatencyP99: 0.002, FsyncP99: 0.012},
			Overhead: map[string]measure.Overhead{"fsync_p99": {Ratio: 0.2, CILow: math.NaN(), CIHigh: math.NaN(), PercentOfHost: 83.3, PercentLow: math.NaN(), PercentHigh: math.NaN(), N: 1, Coverage: math.NaN()}},
			Failures: []measure.FailedRound{{Round: 7, Reason: "no_space", Message: "ENOSPC"}}},
	}
	if err := s.FinishCycle(ctx, c); err != nil {
		t.Fatalf("FinishCycle: %v", err)
	}

	got, err := s.Cycle(ctx, c.ID)
	if err != nil {
		t.Fatalf("Cycle: %v", err)
	}
	want := *c
	want.StartedAt, want.FinishedAt = want.StartedAt.UTC(), want.FinishedAt.UTC()
	if !got.StartedAt.Equal(want.StartedAt) || got.StartedAt.Location() != time.UTC || !got.FinishedAt.Equal(want.FinishedAt) {
		t.Errorf("times: got %v..%v, want %v..%v in UTC", got.StartedAt, got.FinishedAt, want.StartedAt, want.FinishedAt)
	}
	gotHead, wantHead := got, want
	gotHead.Samples, gotHead.Results, wantHead.Samples, wantHead.Results = nil, nil, nil, nil
	gotHead.StartedAt, gotHead.FinishedAt, wantHead.StartedAt, wantHead.FinishedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if fmt.Sprintf("%+v", gotHead) != fmt.Sprintf("%+v", wantHead) {
		t.Errorf("cycle fields:\ngot  %+v\nwant %+v", gotHead, wantHead)
	}
	if g, w := asJSON(t, got.Results), asJSON(t, want.Results); g != w {
		t.Errorf("results:\ngot  %s\nwant %s", g, w)
	}
	if len(got.Samples) != len(want.Samples) {
		t.Fatalf("got %d samples, want %d", len(got.Samples), len(want.Samples))
	}
	for i := range want.Samples {
		g, w := got.Samples[i], want.Samples[i]
		if !g.StartedAt.Equal(w.StartedAt) || g.StartedAt.Location() != time.UTC {
			t.Errorf("sample %d started_at %v, want %v in UTC", i, g.StartedAt, w.StartedAt)
		}
		if g.Runtime != w.Runtime {
			t.Errorf("sample %d runtime %v, want %v", i, g.Runtime, w.Runtime)
		}
		if math.IsNaN(w.DurationSeconds) != math.IsNaN(g.DurationSeconds) || (!math.IsNaN(w.DurationSeconds) && g.DurationSeconds != w.DurationSeconds) {
			t.Errorf("sample %d duration %v, want %v", i, g.DurationSeconds, w.DurationSeconds)
		}
		g.StartedAt, w.StartedAt, g.DurationSeconds, w.DurationSeconds = time.Time{}, time.Time{}, 0, 0
		if gj, wj := asJSON(t, g), asJSON(t, w); gj != wj {
			t.Errorf("sample %d:\ngot  %s\nwant %s", i, gj, wj)
		}
	}
	if !math.IsNaN(got.Samples[0].Write.LatencyP99Sec) || !math.IsNaN(got.Samples[0].Read.LatencyP50Sec) {
		t.Errorf("NaN latencies came back as %v, %v", got.Samples[0].Write.LatencyP99Sec, got.Samples[0].Read.LatencyP50Sec)
	}
	last := got.Samples[len(got.Samples)-1]
	if last.OK() || last.Failure.Reason != measure.ReasonNoSpace || last.Failure.Message != "ENOSPC" {
		t.Errorf("failed sample came back as %+v", last.JobResult)
	}

	// The plain columns: NULL for NaN and for a failed job, fsync p99 only
	// for the fsync job.
	type plain struct {
		ok              bool
		reason          sql.NullString
		iops, p99, sync sql.NullFloat64
	}
	rows, err := s.db.Query(`SELECT ok, failure_reason, iops, write_latency_p99_seconds, fsync_p99_seconds FROM samples WHERE cycle_id = ? ORDER BY seq`, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ps []plain
	for rows.Next() {
		var p plain
		if err := rows.Scan(&p.ok, &p.reason, &p.iops, &p.p99, &p.sync); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	rows.Close()
	if ps[0].p99.Valid || !ps[0].iops.Valid || ps[0].iops.Float64 != c.Samples[0].Write.IOPS || ps[0].sync.Valid {
		t.Errorf("seqwrite with NaN p99: %+v", ps[0])
	}
	if !ps[3].sync.Valid || ps[3].sync.Float64 != c.Samples[3].Sync.LatencyP99Sec {
		t.Errorf("fsync sample: %+v, want fsync_p99 %v", ps[3], c.Samples[3].Sync.LatencyP99Sec)
	}
	if f := ps[len(ps)-1]; f.ok || f.reason.String != "no_space" || f.iops.Valid || f.p99.Valid || f.sync.Valid {
		t.Errorf("failed sample columns: %+v", f)
	}

	// A second finish would duplicate samples: refused.
	if err := s.FinishCycle(ctx, c); err == nil {
		t.Error("FinishCycle twice: no error")
	}
	if _, err := s.Cycle(ctx, c.ID+100); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cycle(missing) = %v, want ErrNotFound", err)
	}
	bogus := &Cycle{ID: c.ID + 100, Result: "ok"}
	if err := s.FinishCycle(ctx, bogus); !errors.Is(err, ErrNotFound) {
		t.Errorf("FinishCycle(missing) = %v, want ErrNotFound", err)
	}
}

func TestRecordSkip(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	c := &Cycle{Engine: "e", Mode: "steady", Trigger: "schedule", StartedAt: t0, Reason: "busy_io_pressure", Message: "some psi"}
	if err := s.RecordSkip(ctx, c); err != nil {
		t.Fatalf("RecordSkip: %v", err)
	}
	f := &Cycle{Engine: "e", Mode: "steady", Trigger: "schedule", StartedAt: t0.Add(time.Minute), Result: "failed", Reason: "unreachable"}
	if err := s.RecordSkip(ctx, f); err != nil {
		t.Fatalf("RecordSkip(failed): %v", err)
	}
	got, err := s.Cycle(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Result != ResultSkipped || got.Reason != "busy_io_pressure" || got.Message != "some psi" || got.FinishedAt.IsZero() || len(got.Samples) != 0 {
		t.Errorf("skipped cycle read back as %+v", got)
	}
	if got, _ := s.Cycle(ctx, f.ID); got.Result != "failed" {
		t.Errorf("failed-before-start cycle read back with result %q", got.Result)
	}
	if err := s.RecordSkip(ctx, c); err == nil {
		t.Error("RecordSkip of an already recorded cycle: no error")
	}
	if err := s.RecordSkip(ctx, &Cycle{Mode: "steady"}); err == nil {
		t.Error("RecordSkip without engine: no error")
	}
}

func TestCyclesOrderFilterLimit(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	// Inserted out of time order: the listing must sort by start time.
	offsets := []int{5, 1, 3, 0, 4, 2}
	for _, o := range offsets {
		for _, engine := range []string{"a", "b"} {
			c := &Cycle{Engine: engine, Mode: "steady", StartedAt: t0.Add(time.Duration(o) * time.Hour), Message: strconv.Itoa(o)}
			if err := s.RecordSkip(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	all, err := s.Cycles(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 12 {
		t.Fatalf("Cycles: %d, want 12", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].StartedAt.After(all[i-1].StartedAt) {
			t.Errorf("not newest first at %d: %v after %v", i, all[i].StartedAt, all[i-1].StartedAt)
		}
	}
	a, err := s.Cycles(ctx, Query{Engine: "a", Since: t0.Add(2 * time.Hour), Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, c := range a {
		if c.Engine != "a" {
			t.Errorf("engine filter let %q through", c.Engine)
		}
		if c.Samples != nil || c.Results != nil {
			t.Errorf("Cycles returned samples or results")
		}
		msgs = append(msgs, c.Message)
	}
	if got := strings.Join(msgs, ","); got != "5,4,3" {
		t.Errorf("engine a since +2h limit 3: %s, want 5,4,3", got)
	}
	since, err := s.Cycles(ctx, Query{Engine: "b", Since: t0.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(since) != 2 {
		t.Errorf("since +4h (inclusive): %d cycles, want 2", len(since))
	}
	if _, err := s.Cycles(ctx, Query{Limit: -1}); err == nil {
		t.Error("negative limit: no error")
	}

	// Default limit.
	for i := 0; i < defaultLimit; i++ {
		if err := s.RecordSkip(ctx, &Cycle{Engine: "c", Mode: "steady", StartedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Cycles(ctx, Query{}); err != nil || len(got) != defaultLimit {
		t.Errorf("Cycles(no limit): %d, %v; want %d", len(got), err, defaultLimit)
	}
}

func TestLatestCycleAndCounts(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	if _, err := s.LatestCycle(ctx, "e", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("LatestCycle on empty store: %v, want ErrNotFound", err)
	}
	ok := finished(t, s, "e", t0, 1, 2, "ok")
	okc, _ := s.Cycle(ctx, ok.ID)
	okc.Results = []measure.Result{{Target: "host", Workload: "fsync", RoundsOK: 2, Raw: measure.Raw{IOPS: 1, BandwidthBytes: math.NaN(), LatencyP50: math.NaN(), LatencyP99: math.NaN(), FsyncP99: math.NaN()}}}
	// Results are written by FinishCycle; record another ok cycle with
	// results to check LatestCycle returns them.
	c := &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(time.Hour)}
	if err := s.StartCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Result, c.Results, c.FirstRound, c.Rounds = "ok", okc.Results, 3, 1
	c.Samples = roundSamples(3, c.StartedAt)
	if err := s.FinishCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	finished(t, s, "e", t0.Add(2*time.Hour), 4, 1, "failed")
	if err := s.RecordSkip(ctx, &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(3 * time.Hour), Reason: "busy_disk"}); err != nil {
		t.Fatal(err)
	}
	finished(t, s, "other", t0.Add(4*time.Hour), 1, 1, "ok")

	latest, err := s.LatestCycle(ctx, "e", "")
	if err != nil || latest.Result != ResultSkipped {
		t.Errorf("LatestCycle(e, any) = %q, %v; want the skipped one", latest.Result, err)
	}
	lok, err := s.LatestCycle(ctx, "e", "ok")
	if err != nil {
		t.Fatal(err)
	}
	if lok.ID != c.ID || lok.Samples != nil || asJSON(t, lok.Results) != asJSON(t, okc.Results) {
		t.Errorf("LatestCycle(e, ok) = id %d samples %d results %s; want id %d, no samples, its results", lok.ID, len(lok.Samples), asJSON(t, lok.Results), c.ID)
	}
	if _, err := s.LatestCycle(ctx, "e", "interrupted"); !errors.Is(err, ErrNotFound) {
		t.Errorf("LatestCycle(e, interrupted) = %v, want ErrNotFound", err)
	}

	counts, err := s.Counts(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"ok": 2, "failed": 1, "skipped": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("Counts(e) = %v, want %v", counts, want)
	}
	if all, _ := s.Counts(ctx, ""); all["ok"] != 3 {
		t.Errorf("Counts(all)[ok] = %d, want 3", all["ok"])
	}
}

func rounds(samples []measure.Sample) []int {
	var out []int
	for i, s := range samples {
		if i == 0 || s.Round != samples[i-1].Round {
			out = append(out, s.Round)
		}
	}
	return out
}

func TestRecentSamplesAndNextRound(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	if n, err := s.NextRound(ctx, "e", "steady"); err != nil || n != 1 {
		t.Fatalf("NextRound on empty store = %d, %v; want 1", n, err)
	}
	if got, err := s.RecentSamples(ctx, "e", "steady", 5); err != nil || len(got) != 0 {
		t.Fatalf("RecentSamples on empty store = %d samples, %v", len(got), err)
	}

	finished(t, s, "e", t0, 1, 3, "ok")                      // rounds 1-3
	finished(t, s, "e", t0.Add(time.Hour), 4, 2, "failed")   // rounds 4-5: ignored
	finished(t, s, "e", t0.Add(2*time.Hour), 6, 2, "ok")     // rounds 6-7
	finished(t, s, "other", t0.Add(3*time.Hour), 8, 3, "ok") // another engine

	// An interrupted cycle: rounds 8 and 9 completed, round 10 cut short.
	ic := &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(4 * time.Hour)}
	if err := s.StartCycle(ctx, ic); err != nil {
		t.Fatal(err)
	}
	ic.FirstRound, ic.Rounds, ic.Result, ic.Reason = 8, 2, ResultInterrupted, "interrupted"
	ic.Samples = append(append(roundSamples(8, ic.StartedAt), roundSamples(9, ic.StartedAt)...), roundSamples(10, ic.StartedAt)[:2]...)
	if err := s.FinishCycle(ctx, ic); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSkip(ctx, &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(5 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A cold-mode cycle must not leak into steady windows.
	cold := &Cycle{Engine: "e", Mode: "cold", StartedAt: t0.Add(6 * time.Hour)}
	if err := s.StartCycle(ctx, cold); err != nil {
		t.Fatal(err)
	}
	cold.Result, cold.FirstRound, cold.Rounds, cold.Samples = "ok", 1, 1, roundSamples(50, t0)
	if err := s.FinishCycle(ctx, cold); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "[9]"},
		{3, "[7 8 9]"},
		{4, "[6 7 8 9]"},
		{6, "[2 3 6 7 8 9]"},
		{100, "[1 2 3 6 7 8 9]"},
	} {
		got, err := s.RecentSamples(ctx, "e", "steady", tc.n)
		if err != nil {
			t.Fatalf("RecentSamples(%d): %v", tc.n, err)
		}
		if g := fmt.Sprint(rounds(got)); g != tc.want {
			t.Errorf("RecentSamples(%d) rounds %s, want %s", tc.n, g, tc.want)
		}
		if len(got) != perRound*len(rounds(got)) {
			t.Errorf("RecentSamples(%d): %d samples for %d rounds, want %d per round", tc.n, len(got), len(rounds(got)), perRound)
		}
		for _, sm := range got {
			if sm.Round == 8 && sm.Target == measure.TargetBind && sm.Workload == measure.SeqWrite && sm.Order != 1 {
				t.Errorf("sample of round 8 with wrong order %d", sm.Order)
			}
		}
	}
	// Oldest first, and within a round in recorded order.
	got, _ := s.RecentSamples(ctx, "e", "steady", 1)
	want := roundSamples(9, ic.StartedAt)
	for i := range want {
		if got[i].Target != want[i].Target || got[i].Workload != want[i].Workload || got[i].Write.IOPS != want[i].Write.IOPS {
			t.Errorf("round 9 sample %d: %s/%s iops %v, want %s/%s iops %v", i, got[i].Target, got[i].Workload, got[i].Write.IOPS, want[i].Target, want[i].Workload, want[i].Write.IOPS)
		}
	}
	if cs, _ := s.RecentSamples(ctx, "e", "cold", 10); fmt.Sprint(rounds(cs)) != "[50]" {
		t.Errorf("cold samples: rounds %v, want [50]", rounds(cs))
	}
	if got, _ := s.RecentSamples(ctx, "e", "steady", 0); len(got) != 0 {
		t.Errorf("RecentSamples(0) returned %d samples", len(got))
	}

	// NextRound counts every stored round, the failed and the cut ones too.
	if n, err := s.NextRound(ctx, "e", "steady"); err != nil || n != 11 {
		t.Errorf("NextRound(e, steady) = %d, %v; want 11", n, err)
	}
	if n, _ := s.NextRound(ctx, "other", "steady"); n != 11 {
		t.Errorf("NextRound(other) = %d, want 11", n)
	}
	if n, _ := s.NextRound(ctx, "e", "cold"); n != 51 {
		t.Errorf("NextRound(e, cold) = %d, want 51", n)
	}
	// A finished cycle that declares rounds but kept no samples of them
	// still reserves their numbers.
	nc := &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(7 * time.Hour)}
	if err := s.StartCycle(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Result, nc.FirstRound, nc.Rounds = "failed", 11, 3
	if err := s.FinishCycle(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.NextRound(ctx, "e", "steady"); n != 14 {
		t.Errorf("NextRound after a sample-less cycle of rounds 11-13 = %d, want 14", n)
	}
}

func TestBytesWrittenSince(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	if n, err := s.BytesWrittenSince(ctx, "e", t0); err != nil || n != 0 {
		t.Fatalf("BytesWrittenSince on empty store = %d, %v", n, err)
	}
	for i, b := range []int64{100, 200, 400} {
		c := &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(time.Duration(i) * time.Hour)}
		if err := s.StartCycle(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Result, c.BytesWritten = "ok", b
		if err := s.FinishCycle(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordSkip(ctx, &Cycle{Engine: "x", Mode: "steady", StartedAt: t0.Add(2 * time.Hour), BytesWritten: 1000}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		engine string
		since  time.Time
		want   int64
	}{
		{"e", t0.Add(-time.Hour), 700},
		{"e", t0.Add(time.Hour), 600}, // inclusive
		{"e", t0.Add(time.Hour + time.Nanosecond), 400},
		{"e", t0.Add(3 * time.Hour), 0},
		{"", t0.Add(2 * time.Hour), 1400},
	} {
		if n, err := s.BytesWrittenSince(ctx, tc.engine, tc.since); err != nil || n != tc.want {
			t.Errorf("BytesWrittenSince(%q, %v) = %d, %v; want %d", tc.engine, tc.since, n, err, tc.want)
		}
	}
}

func countRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPrune(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	old := finished(t, s, "e", t0, 1, 2, "ok")                 // finishes t0+10m
	keep := finished(t, s, "e", t0.Add(time.Hour), 3, 1, "ok") // finishes t0+70m
	running := &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(-48 * time.Hour)}
	if err := s.StartCycle(ctx, running); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDetectorState(ctx, "e", "steady", "container", []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, "samples"); n != 3*perRound {
		t.Fatalf("samples before prune: %d, want %d", n, 3*perRound)
	}

	n, err := s.Prune(ctx, t0.Add(30*time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	if _, err := s.Cycle(ctx, old.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("pruned cycle still there: %v", err)
	}
	var orphans int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM samples WHERE cycle_id = ?`, old.ID).Scan(&orphans); err != nil || orphans != 0 {
		t.Errorf("samples of the pruned cycle: %d (%v), want 0: ON DELETE CASCADE not in force", orphans, err)
	}
	if n := countRows(t, s, "samples"); n != perRound {
		t.Errorf("samples after prune: %d, want %d", n, perRound)
	}
	if c, err := s.Cycle(ctx, keep.ID); err != nil || len(c.Samples) != perRound {
		t.Errorf("kept cycle: %d samples, %v", len(c.Samples), err)
	}
	if c, err := s.Cycle(ctx, running.ID); err != nil || c.Result != ResultRunning {
		t.Errorf("running cycle pruned or changed: %+v, %v", c, err)
	}
	if _, err := s.DetectorState(ctx, "e", "steady", "container"); err != nil {
		t.Errorf("Prune removed detector state: %v", err)
	}
	if n, err := s.Prune(ctx, t0.Add(30*time.Minute)); err != nil || n != 0 {
		t.Errorf("second Prune = %d, %v; want 0", n, err)
	}
	// Ids are never reused after a prune.
	next := finished(t, s, "e", t0.Add(2*time.Hour), 4, 1, "ok")
	if _, err := s.Prune(ctx, t0.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	again := finished(t, s, "e", t0.Add(3*time.Hour), 5, 1, "ok")
	if again.ID <= next.ID {
		t.Errorf("id %d reused after prune (previous %d)", again.ID, next.ID)
	}
}

func TestDetectorState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	if _, err := s.DetectorState(ctx, "e", "steady", "container"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DetectorState before save: %v, want ErrNotFound", err)
	}
	st1 := []byte(`{"baseline":{"median":0.1},"cusum":0}`)
	st2 := []byte(`{"baseline":{"median":0.1},"cusum":2.5,"regressed":true}`)
	for _, st := range [][]byte{st1, st2} {
		if err := s.SaveDetectorState(ctx, "e", "steady", "container", st); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveDetectorState(ctx, "e", "steady", "bind", st1); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDetectorState(ctx, "e", "steady", "volume", []byte("not json")); err == nil {
		t.Error("SaveDetectorState(not JSON): no error")
	}
	check := func(s *Store) {
		t.Helper()
		for target, want := range map[measure.Target][]byte{"container": st2, "bind": st1} {
			got, err := s.DetectorState(ctx, "e", "steady", target)
			if err != nil || string(got) != string(want) {
				t.Errorf("DetectorState(%s) = %s, %v; want %s", target, got, err, want)
			}
		}
		if _, err := s.DetectorState(ctx, "e", "cold", "container"); !errors.Is(err, ErrNotFound) {
			t.Errorf("DetectorState(other mode): %v, want ErrNotFound", err)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(openStore(t, dir))
}

func TestSecondOpenIsLocked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	first := finished(t, s, "e", t0, 1, 1, "ok")
	dbInfo, err := os.Stat(filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}

	s2, err := Open(dir, testharness.Logger(t))
	if err == nil {
		s2.Close()
		t.Fatal("second Open on the same directory succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	for _, want := range []string{dir, "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if after, err := os.Stat(filepath.Join(dir, DBFile)); err != nil || !after.ModTime().Equal(dbInfo.ModTime()) || after.Size() != dbInfo.Size() {
		t.Errorf("the locked-out Open touched the database")
	}

	// The first store is still fully usable.
	second := finished(t, s, "e", t0.Add(time.Hour), 2, 1, "ok")
	for _, id := range []int64{first.ID, second.ID} {
		if c, err := s.Cycle(ctx, id); err != nil || len(c.Samples) != perRound {
			t.Errorf("Cycle(%d) after the refused Open: %d samples, %v", id, len(c.Samples), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// And once it is closed, the directory is free again.
	openStore(t, dir)
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state", "nested")
	s := openStore(t, dir)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode: %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	a := finished(t, s, "e", t0, 1, 2, "ok")
	if err := s.RecordSkip(ctx, &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(time.Hour), Reason: "low_space"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDetectorState(ctx, "e", "steady", "container", []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	before, err := s.Cycles(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Close checkpointed: the WAL is gone and the main file holds it all.
	if _, err := os.Stat(filepath.Join(dir, DBFile+"-wal")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("WAL file left after Close: %v", err)
	}

	s = openStore(t, dir)
	after, err := s.Cycles(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("cycles after reopen:\n%v\nwant\n%v", after, before)
	}
	if c, err := s.Cycle(ctx, a.ID); err != nil || len(c.Samples) != 2*perRound {
		t.Errorf("Cycle after reopen: %d samples, %v", len(c.Samples), err)
	}
	if st, err := s.DetectorState(ctx, "e", "steady", "container"); err != nil || string(st) != `{"x":1}` {
		t.Errorf("detector state after reopen: %s, %v", st, err)
	}
	if n, err := s.NextRound(ctx, "e", "steady"); err != nil || n != 3 {
		t.Errorf("NextRound after reopen = %d, %v; want 3", n, err)
	}
	var version int
	if err := s.db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&version); err != nil || version != schemaVersion {
		t.Errorf("schema version %d, %v; want %d", version, err, schemaVersion)
	}
	var rows int
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&rows); err != nil || rows != schemaVersion {
		t.Errorf("schema_version rows %d, %v; want %d (migrations ran again?)", rows, err, schemaVersion)
	}
}

func TestOpenRecoversRunningCycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	done := finished(t, s, "e", t0, 1, 1, "ok")
	c := &Cycle{Engine: "e", Mode: "steady", StartedAt: t0.Add(time.Hour)}
	if err := s.StartCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	got, err := s.Cycle(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Result != ResultInterrupted || got.Reason != "interrupted" || got.Message != "agent stopped during the cycle" || !got.FinishedAt.Equal(got.StartedAt) {
		t.Errorf("left-running cycle after reopen: %+v", got)
	}
	if d, _ := s.Cycle(ctx, done.ID); d.Result != "ok" {
		t.Errorf("finished cycle changed to %q", d.Result)
	}
	if err := s.FinishCycle(ctx, &got); err == nil {
		t.Error("FinishCycle of a recovered cycle: no error")
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	if _, err := s.db.Exec(`INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, schemaVersion+1, formatTime(t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, testharness.Logger(t))
	if err == nil {
		s2.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Errorf("error %q does not say the schema is newer", err)
	}
	// The refusal released the lock.
	s3, err := Open(dir, testharness.Logger(t))
	if errors.Is(err, ErrLocked) {
		t.Fatalf("lock not released after a failed Open: %v", err)
	}
	if s3 != nil {
		s3.Close()
	}
}

func TestTimeFormatOrdersAsText(t *testing.T) {
	// RFC3339Nano would write 12:00:00Z and 12:00:00.5Z, which sort the
	// wrong way round as text; the stored form must not.
	a, b := formatTime(t0), formatTime(t0.Add(500*time.Millisecond))
	if !(a < b) || len(a) != len(b) {
		t.Errorf("%q and %q do not order as text", a, b)
	}
	if got, err := parseTime(sql.NullString{String: b, Valid: true}); err != nil || !got.Equal(t0.Add(500*time.Millisecond)) {
		t.Errorf("parseTime(%q) = %v, %v", b, got, err)
	}
	if formatTime(t0.In(time.FixedZone("X", -7*3600))) != formatTime(t0) {
		t.Error("formatTime does not normalise to UTC")
	}
}

// A store written before the workload was called workload (schema v3,
// `job` in the samples column and in the stored JSON) reads back exactly
// as the store of today: the agent reads its history from it after an
// upgrade.
func TestUpgradeFromJobNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	c := &Cycle{Engine: "e", Mode: "steady", Profile: "quick", Trigger: "schedule", StartedAt: t0,
		Driver: "overlay2", BackingFS: "extfs", EngineVersion: "29.0.0", FioVersion: "fio-3.38"}
	if err := s.StartCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.FirstRound, c.Rounds, c.Result, c.FinishedAt = 1, 2, "ok", t0.Add(10*time.Minute)
	c.Samples = append(roundSamples(1, t0), roundSamples(2, t0)...)
	c.Results = []measure.Result{{Target: measure.TargetContainer, Workload: measure.Fsync, RoundsOK: 2,
		Raw:      measure.Raw{IOPS: 10, BandwidthBytes: 40960, LatencyP50: 0.001, LatencyP99: 0.002, FsyncP99: 0.01},
		Overhead: map[string]measure.Overhead{"fsync_p99": {Ratio: 0.1, CILow: 0.05, CIHigh: 0.2, PercentOfHost: 90, PercentLow: 80, PercentHigh: 95, N: 2, Coverage: 0.5}}}}
	if err := s.FinishCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	want, err := s.Cycle(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantRecent, err := s.RecentSamples(ctx, "e", "steady", 1)
	if err != nil || len(wantRecent) != perRound {
		t.Fatalf("RecentSamples: %d samples, %v; want %d", len(wantRecent), err, perRound)
	}

	// Turn the database into what a v3 agent left: the old column name and
	// the old JSON field, no later table and no v4 or later row.
	for _, q := range []string{
		`ALTER TABLE samples RENAME COLUMN workload TO job`,
		`UPDATE samples SET result_json = replace(result_json, '"workload":', '"job":')`,
		`UPDATE cycles SET results_json = replace(results_json, '"workload":', '"job":')`,
		`DROP TABLE lookup_samples`,
		`DELETE FROM schema_version WHERE version >= 4`,
	} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var old string
	if err := s.db.QueryRow(`SELECT result_json FROM samples LIMIT 1`).Scan(&old); err != nil || !strings.Contains(old, `"job":"seqwrite"`) {
		t.Fatalf("old-style sample %s, %v", old, err)
	}
	// An empty and a broken results list must survive the migration too.
	if _, err := s.db.Exec(`INSERT INTO cycles (engine, mode, started_at, result, results_json) VALUES ('e', 'steady', ?, 'skipped', '[]')`, formatTime(t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	got, err := s.Cycle(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if asJSON(t, got) != asJSON(t, want) {
		t.Errorf("cycle after the upgrade:\n%s\nwant\n%s", asJSON(t, got), asJSON(t, want))
	}
	for _, sm := range got.Samples {
		if sm.Workload == "" {
			t.Fatalf("sample without workload after the upgrade: %+v", sm)
		}
	}
	// The migration rewrote the stored JSON: one name for readers of the
	// database, too.
	var jobs int
	if err := s.db.QueryRow(`SELECT (SELECT COUNT(*) FROM samples WHERE result_json LIKE '%"job"%') +
		(SELECT COUNT(*) FROM cycles WHERE results_json LIKE '%"job"%')`).Scan(&jobs); err != nil || jobs != 0 {
		t.Errorf("%d rows still say job after the migration (%v)", jobs, err)
	}
	recent, err := s.RecentSamples(ctx, "e", "steady", 1)
	if err != nil || asJSON(t, recent) != asJSON(t, wantRecent) {
		t.Errorf("RecentSamples after the upgrade: %v\n%s\nwant\n%s", err, asJSON(t, recent), asJSON(t, wantRecent))
	}
}

// TestClaimRounds: a cycle recorded before it knew its rounds (an API
// trigger's) claims them while it runs; NextRound counts them as it does
// a cycle started with them, and a finished cycle claims nothing.
func TestClaimRounds(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	c := &Cycle{Engine: "e", Mode: "steady", Trigger: "api", StartedAt: t0}
	if err := s.StartCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.NextRound(ctx, "e", "steady"); n != 1 {
		t.Fatalf("NextRound before the claim = %d, want 1", n)
	}
	c.FirstRound, c.Rounds, c.Driver = 1, 40, "overlay2"
	if err := s.ClaimRounds(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.NextRound(ctx, "e", "steady"); n != 41 {
		t.Errorf("NextRound after claiming rounds 1-40 = %d, want 41", n)
	}
	if got, err := s.Cycle(ctx, c.ID); err != nil || got.Result != ResultRunning || got.Driver != "overlay2" || got.Rounds != 40 {
		t.Errorf("claimed cycle = %+v, %v", got, err)
	}
	c.Result = ResultOK
	if err := s.FinishCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimRounds(ctx, c); err == nil {
		t.Error("a finished cycle claimed rounds")
	}
}
