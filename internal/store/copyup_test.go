package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

func coldCycle(t *testing.T, s *Store, start time.Time, first, n int, result string, reflink *bool) Cycle {
	t.Helper()
	ctx := context.Background()
	c := &Cycle{Engine: "e", Mode: measure.ModeCold, Profile: "quick", Trigger: "schedule", StartedAt: start}
	if err := s.StartCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.FirstRound, c.Rounds, c.Result, c.Reflink = first, n, result, reflink
	for r := first; r < first+n; r++ {
		c.CopyUp = append(c.CopyUp,
			measure.CopyUpSample{Round: r, Target: measure.TargetContainer, SizeBytes: 1 << 20, Seconds: 0.004 + float64(r)/1000},
			measure.CopyUpSample{Round: r, Target: measure.TargetHost, SizeBytes: 1 << 20, Seconds: 0.0005},
			measure.CopyUpSample{Round: r, Target: measure.TargetContainer, SizeBytes: 64 << 20, Error: "permission denied"})
		c.Lookup = append(c.Lookup,
			measure.LookupSample{Round: r, Target: measure.TargetContainer, Op: measure.LookupWalk, Entries: 2201, Seconds: 0.02 + float64(r)/1000},
			measure.LookupSample{Round: r, Target: measure.TargetHost, Op: measure.LookupWalk, Entries: 2201, Seconds: 0.006},
			measure.LookupSample{Round: r, Target: measure.TargetContainer, Op: measure.LookupDirCreate, Depth: 3, Seconds: 0.0004},
			measure.LookupSample{Round: r, Target: measure.TargetHost, Op: measure.LookupDirCreate, Depth: 3, Error: "no space left on device"})
	}
	c.FinishedAt = start.Add(time.Minute)
	if err := s.FinishCycle(ctx, c); err != nil {
		t.Fatal(err)
	}
	return *c
}

func TestCopyUpRoundTripAndWindow(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	yes := true
	a := coldCycle(t, s, t0, 1, 3, "ok", &yes)
	coldCycle(t, s, t0.Add(time.Hour), 4, 2, "failed", nil)
	c := coldCycle(t, s, t0.Add(2*time.Hour), 6, 3, "ok", nil)
	// A steady cycle of the same engine must not leak into cold windows.
	finished(t, s, "e", t0.Add(3*time.Hour), 1, 2, "ok")

	got, err := s.Cycle(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if asJSON(t, got.CopyUp) != asJSON(t, a.CopyUp) {
		t.Errorf("copy-up round trip:\n got %s\nwant %s", asJSON(t, got.CopyUp), asJSON(t, a.CopyUp))
	}
	if got.Reflink == nil || !*got.Reflink {
		t.Errorf("reflink = %v, want true", got.Reflink)
	}
	if g, _ := s.Cycle(ctx, c.ID); g.Reflink != nil {
		t.Errorf("unknown reflink read back as %v, want nil", *g.Reflink)
	}

	recent, err := s.RecentCopyUp(ctx, "e", 4)
	if err != nil {
		t.Fatal(err)
	}
	var roundsSeen []int
	for _, u := range recent {
		if len(roundsSeen) == 0 || roundsSeen[len(roundsSeen)-1] != u.Round {
			roundsSeen = append(roundsSeen, u.Round)
		}
	}
	// The failed cycle's rounds 4 and 5 are not usable: the last four
	// usable rounds are 3, 6, 7, 8.
	if want := []int{3, 6, 7, 8}; asJSON(t, roundsSeen) != asJSON(t, want) {
		t.Errorf("RecentCopyUp rounds = %v, want %v", roundsSeen, want)
	}

	latest, err := s.LatestCycleOf(ctx, "e", measure.ModeCold, "ok")
	if err != nil || latest.ID != c.ID {
		t.Errorf("LatestCycleOf(cold, ok) = %d, %v; want %d", latest.ID, err, c.ID)
	}
	if n, err := s.Prune(ctx, t0.Add(90*time.Minute)); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	if n := countRows(t, s, "copyup_samples"); n != len(c.CopyUp) {
		t.Errorf("%d copy-up rows after pruning, want %d (cascade)", n, len(c.CopyUp))
	}
}

// The lookup samples of a cold cycle come back as they were stored, a
// failed one with its error and no time, and the window takes the last
// rounds of usable cold cycles as the copy-up window does.
func TestLookupRoundTripAndWindow(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := coldCycle(t, s, t0, 1, 3, "ok", nil)
	coldCycle(t, s, t0.Add(time.Hour), 4, 2, "failed", nil)
	c := coldCycle(t, s, t0.Add(2*time.Hour), 6, 3, "ok", nil)
	got, err := s.Cycle(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if asJSON(t, got.Lookup) != asJSON(t, a.Lookup) {
		t.Errorf("lookup round trip:\n got %s\nwant %s", asJSON(t, got.Lookup), asJSON(t, a.Lookup))
	}
	recent, err := s.RecentLookup(ctx, "e", 4)
	if err != nil {
		t.Fatal(err)
	}
	rounds := map[int]int{}
	for _, l := range recent {
		rounds[l.Round]++
		if l.Target == measure.TargetHost && l.Op == measure.LookupDirCreate && (l.OK() || l.Error == "") {
			t.Errorf("failed host create read back as %+v", l)
		}
	}
	if fmt.Sprint(rounds) != "map[3:4 6:4 7:4 8:4]" {
		t.Errorf("RecentLookup samples per round = %v, want 4 in each of rounds 3, 6, 7, 8 (the failed cycle's 4 and 5 left out)", rounds)
	}
	if n, err := s.Prune(ctx, t0.Add(90*time.Minute)); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	if n := countRows(t, s, "lookup_samples"); n != len(c.Lookup) {
		t.Errorf("%d lookup rows after pruning, want %d (cascade)", n, len(c.Lookup))
	}
}

// A state directory written by a layerprobe without the cold probe (schema
// v1) upgrades in place and keeps its cycles.
func TestMigrationFromV1KeepsCycles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	saved := migrations
	migrations = migrations[:1]
	schemaVersion = 1
	s, err := Open(dir, testharness.Logger(t))
	if err != nil {
		migrations, schemaVersion = saved, len(saved)
		t.Fatal(err)
	}
	db := s.db
	if _, err := db.ExecContext(ctx, `INSERT INTO cycles (engine, mode, started_at, finished_at, result)
VALUES ('e', 'steady', '2026-03-01T12:00:00.000000000Z', '2026-03-01T12:01:00.000000000Z', 'ok')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	migrations, schemaVersion = saved, len(saved)

	s = openStore(t, dir)
	cs, err := s.Cycles(ctx, Query{})
	if err != nil || len(cs) != 1 || cs[0].Reflink != nil {
		t.Fatalf("after upgrade: %+v, %v; want the v1 cycle with unknown reflink", cs, err)
	}
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Errorf("schema version %d, %v; want %d", v, err, len(migrations))
	}
}
