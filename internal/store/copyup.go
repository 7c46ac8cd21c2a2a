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
// ORDER BY clause in which copyup_samples is aliased x).
func queryCopyUp(ctx context.Context, q queryer, from string, args ...any) ([]measure.CopyUpSample, error) {
	out, err := queryAll(ctx, q, `SELECT x.round, x.target, x.size_bytes, x.seconds, x.error `+from, args,
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

// RecentCopyUp returns the copy-up samples of the last rounds distinct cold
// rounds of engine, oldest first.
func (s *Store) RecentCopyUp(ctx context.Context, engine string, rounds int) ([]measure.CopyUpSample, error) {
	out, err := recentCold(ctx, s, "copyup_samples", queryCopyUp, engine, rounds)
	if err != nil {
		return nil, fmt.Errorf("recent copy-up samples of %s: %w", engine, err)
	}
	return out, nil
}

// usableCold selects the rows of a cold probe's table (aliased x, with
// cycle_id, engine, round and seq) as usableSamples selects samples: those
// of ok cold cycles and of the completed rounds of interrupted ones.
func usableCold(table string) string {
	return `
FROM ` + table + ` x JOIN cycles c ON c.id = x.cycle_id
WHERE x.engine = ? AND c.mode = 'cold'
  AND (c.result = 'ok'
       OR (c.result = 'interrupted' AND c.first_round > 0 AND x.round < c.first_round + c.rounds))`
}

// recentCold reads with query the usable rows of table of the last rounds
// distinct cold rounds of engine, oldest first.
func recentCold[T any](ctx context.Context, s *Store, table string,
	query func(context.Context, queryer, string, ...any) ([]T, error), engine string, rounds int) ([]T, error) {
	if rounds <= 0 {
		return nil, nil
	}
	usable := usableCold(table)
	return query(ctx, s.db, usable+`
  AND x.round IN (SELECT DISTINCT x.round `+usable+` ORDER BY x.round DESC LIMIT ?)
ORDER BY x.round, x.cycle_id, x.seq`, engine, engine, rounds)
}
