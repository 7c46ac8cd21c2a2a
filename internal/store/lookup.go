package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// insertLookup stores a cold cycle's lookup timings (stat walks and first
// creates in the cold image's tree); a failed one keeps its error and a
// NULL time, as insertCopyUp does.
func insertLookup(ctx context.Context, tx *sql.Tx, c *Cycle) error {
	if len(c.Lookup) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO lookup_samples (
	cycle_id, seq, engine, round, target, op, entries, depth, seconds, error
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("insert lookup samples: %w", err)
	}
	defer stmt.Close()
	for i, l := range c.Lookup {
		var secs sql.NullFloat64
		if l.OK() {
			secs = sql.NullFloat64{Float64: l.Seconds, Valid: true}
		}
		if _, err := stmt.ExecContext(ctx, c.ID, i, c.Engine, l.Round, l.Target, l.Op, l.Entries, l.Depth, secs, l.Error); err != nil {
			return fmt.Errorf("insert lookup sample %d: %w", i, err)
		}
	}
	return nil
}

// queryLookup reads lookup samples selected by from (a FROM ... WHERE ...
// ORDER BY clause in which lookup_samples is aliased x).
func queryLookup(ctx context.Context, q queryer, from string, args ...any) ([]measure.LookupSample, error) {
	out, err := queryAll(ctx, q, `SELECT x.round, x.target, x.op, x.entries, x.depth, x.seconds, x.error `+from, args,
		func(rows *sql.Rows) (measure.LookupSample, error) {
			var l measure.LookupSample
			var secs sql.NullFloat64
			err := rows.Scan(&l.Round, &l.Target, &l.Op, &l.Entries, &l.Depth, &secs, &l.Error)
			l.Seconds = secs.Float64
			return l, err
		})
	if err != nil {
		return nil, fmt.Errorf("read lookup samples: %w", err)
	}
	return out, nil
}

// RecentLookup returns the lookup samples of the last rounds distinct cold
// rounds of engine, oldest first (usableCold, as RecentCopyUp).
func (s *Store) RecentLookup(ctx context.Context, engine string, rounds int) ([]measure.LookupSample, error) {
	out, err := recentCold(ctx, s, "lookup_samples", queryLookup, engine, rounds)
	if err != nil {
		return nil, fmt.Errorf("recent lookup samples of %s: %w", engine, err)
	}
	return out, nil
}
