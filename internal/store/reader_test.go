package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// TestReaderBesideTheAgent: a reader opens the store the agent holds,
// reads its rounds, sees what the agent writes later, and cannot write.
func TestReaderBesideTheAgent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := OpenReader(dir, testharness.Logger(t)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OpenReader of an empty directory = %v, want ErrNotFound", err)
	}
	w := openStore(t, dir)
	finished(t, w, "default", t0, 1, 2, ResultOK)

	r, err := OpenReader(dir, testharness.Logger(t))
	if err != nil {
		t.Fatalf("OpenReader beside the agent: %v", err)
	}
	defer r.Close()
	got, err := r.RecentSamples(ctx, "default", "steady", 10)
	if err != nil || len(got) != 2*perRound {
		t.Fatalf("RecentSamples through the reader = %d samples, %v; want %d", len(got), err, 2*perRound)
	}
	finished(t, w, "default", t0.Add(time.Hour), 3, 1, ResultOK)
	if got, err := r.RecentSamples(ctx, "default", "steady", 10); err != nil || len(got) != 3*perRound {
		t.Errorf("after the agent wrote another cycle: %d samples, %v; want %d", len(got), err, 3*perRound)
	}
	if _, err := r.db.ExecContext(ctx, `DELETE FROM cycles`); err == nil {
		t.Errorf("a reader could delete the agent's cycles")
	}
	if n := countRows(t, w, "cycles"); n != 2 {
		t.Errorf("%d cycles after the reader's attempt, want 2", n)
	}
	if err := r.Close(); err != nil {
		t.Errorf("reader Close: %v", err)
	}
	if _, err := w.RecentSamples(ctx, "default", "steady", 1); err != nil {
		t.Errorf("the agent's store after the reader closed: %v", err)
	}
}

func TestReaderRefusesOtherSchema(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	if _, err := s.db.Exec(`INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, schemaVersion+1, formatTime(t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReader(dir, testharness.Logger(t)); err == nil || !strings.Contains(err.Error(), "schema version") {
		t.Errorf("OpenReader of a newer schema = %v, want a refusal naming the schema version", err)
	}
}
