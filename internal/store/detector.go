package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// SaveDetectorState stores the regression detector's state for engine,
// mode and target, replacing the previous one. The store does not interpret
// it, but it must be JSON: the column is text that sqlite3 users read.
func (s *Store) SaveDetectorState(ctx context.Context, engine string, mode measure.Mode, target measure.Target, state []byte) error {
	if !json.Valid(state) {
		return fmt.Errorf("save detector state of %s/%s/%s: state is not valid JSON", engine, mode, target)
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO detector_state (engine, mode, target, state_json, updated_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (engine, mode, target) DO UPDATE SET state_json = excluded.state_json, updated_at = excluded.updated_at`,
			engine, mode, target, string(state), formatTime(time.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("save detector state of %s/%s/%s: %w", engine, mode, target, err)
	}
	return nil
}

// DetectorState returns the state SaveDetectorState stored for engine, mode
// and target, or ErrNotFound.
func (s *Store) DetectorState(ctx context.Context, engine string, mode measure.Mode, target measure.Target) ([]byte, error) {
	var state string
	err := s.db.QueryRowContext(ctx,
		`SELECT state_json FROM detector_state WHERE engine = ? AND mode = ? AND target = ?`,
		engine, mode, target).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("detector state of %s/%s/%s: %w", engine, mode, target, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read detector state of %s/%s/%s: %w", engine, mode, target, err)
	}
	return []byte(state), nil
}
