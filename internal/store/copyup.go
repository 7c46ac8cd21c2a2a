package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// insertCopyUp stores a cold cycle's copy-up timings; a failed write keeps
// its error and a NULL time, never a zero that would read as instant.
func insertCopyUp(ctx context.Context, tx *sql.Tx, c *Cycle) error {
	if len(c.CopyUp) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO copyup_samples (
	cycle_id, seq, engine, round, target, size_bytes, seconds, error
) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("insert copy-up samples: %w", err)
	}
	defer stmt.Close()
	for i, u := range c.CopyUp {
		var secs sql.NullFloat64
		if u.OK() {
			secs = sql.NullFloat64{Float64: u.Seconds, Valid: true}
		}
		if _, err := stmt.ExecContext(ctx, c.ID, i, c.Engine, u.Round, u.Target, u.SizeBytes, secs, u.Error); err != nil {
			return fmt.Errorf("insert copy-up sample %d: %w", i, err)
		}
	}
	return nil
}

// queryCopyUp reads copy-up samples selected by from (a FROM ... WHERE ...
// ORDER BY clause in which copyup_samples is aliased u).
func queryCopyUp(ctx context.Context, q queryer, from string, args ...any) ([]measure.CopyUpSample, error) {
	out, err := queryAll(ctx, q, `SELECT u.round, u.target, u.size_bytes, u.seconds, u.error `+from, args,
		func(rows *sql.Rows) (measure.CopyUpSample, error) {
			var u measure.CopyUpSample
			var secs sql.NullFloat64
			err := rows.Scan(&u.Round, &u.Target, &u.SizeBytes, &secs, &u.Error)
			u.Seconds = secs.Float64
			return u, err
		})
	if err != nil {
		return nil, fmt.Errorf("read copy-up samples: %w", err)
	}
	return out, nil
}

// usableCopyUp selects copy-up samples as usableSamples selects samples:
// those of ok cold cycles and of the completed rounds of interrupted ones.
const usableCopyUp = `
FROM copyup_samples u JOIN cycles c ON c.id = u.cycle_id
WHERE u.engine = ? AND c.mode = 'cold'
  AND (c.result = 'ok'
       OR (c.result = 'interrupted' AND c.first_round > 0 AND u.round < c.first_round + c.rounds))`

// RecentCopyUp returns the copy-up samples of the last rounds distinct cold
// rounds of engine, oldest first.
func (s *Store) RecentCopyUp(ctx context.Context, engine string, rounds int) ([]measure.CopyUpSample, error) {
	if rounds <= 0 {
		return nil, nil
	}
	out, err := queryCopyUp(ctx, s.db, usableCopyUp+`
  AND u.round IN (SELECT DISTINCT u.round `+usableCopyUp+` ORDER BY u.round DESC LIMIT ?)
ORDER BY u.round, u.cycle_id, u.seq`, engine, engine, rounds)
	if err != nil {
		return nil, fmt.Errorf("recent copy-up samples of %s: %w", engine, err)
	}
	return out, nil
}
