package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// sampleRow is one samples row, encoded before the write transaction
// begins so that the transaction only executes statements.
type sampleRow struct {
	seq                         int
	round, ord                  int
	target, workload            string
	ok                          bool
	failureReason               sql.NullString
	startedAt                   string
	duration                    sql.NullFloat64
	runtimeNS, bytesWritten     int64
	iops, bandwidth, p99, fsync sql.NullFloat64
	json                        string
	engine, mode                string
}

func encodeSamples(c *Cycle) ([]sampleRow, error) {
	rows := make([]sampleRow, 0, len(c.Samples))
	for i, sm := range c.Samples {
		sm.StartedAt = sm.StartedAt.UTC()
		duration := nullFloat(sm.DurationSeconds)
		// encoding/json refuses NaN. The column keeps the real value
		// (NULL) and is what Cycle reads back; the JSON gets 0 so that
		// one odd figure cannot cost the whole cycle.
		if !duration.Valid {
			sm.DurationSeconds = 0
		}
		b, err := json.Marshal(sm)
		if err != nil {
			return nil, fmt.Errorf("encode sample %d (round %d, %s, %s): %w", i, sm.Round, sm.Target, sm.Workload, err)
		}
		r := sampleRow{
			seq: i, round: sm.Round, ord: sm.Order, target: string(sm.Target), workload: string(sm.Workload),
			ok: sm.OK(), startedAt: formatTime(sm.StartedAt), duration: duration,
			runtimeNS: int64(sm.Runtime), bytesWritten: sm.BytesWritten,
			// MetricValue is the definition the metrics and summaries use,
			// and NaN (NULL) for a failed job: a zero would read as a
			// measurement.
			iops:      nullFloat(measure.MetricValue(measure.MetricIOPS, sm.JobResult)),
			bandwidth: nullFloat(measure.MetricValue(measure.MetricBandwidth, sm.JobResult)),
			p99:       nullFloat(measure.MetricValue(measure.MetricLatencyP99, sm.JobResult)),
			fsync:     nullFloat(measure.MetricValue(measure.MetricFsyncP99, sm.JobResult)),
			json:      string(b), engine: c.Engine, mode: string(c.Mode),
		}
		if sm.Failure != nil {
			r.failureReason = sql.NullString{String: string(sm.Failure.Reason), Valid: true}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func insertSamples(ctx context.Context, tx *sql.Tx, cycleID int64, rows []sampleRow) error {
	if len(rows) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO samples (
	cycle_id, seq, engine, mode, round, ord, target, workload, ok, failure_reason, started_at,
	duration_seconds, runtime_ns, bytes_written, iops, bandwidth_bytes_per_second,
	write_latency_p99_seconds, fsync_p99_seconds, result_json
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("insert samples: %w", err)
	}
	defer stmt.Close()
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, cycleID, r.seq, r.engine, r.mode, r.round, r.ord, r.target,
			r.workload, r.ok, r.failureReason, r.startedAt, r.duration, r.runtimeNS, r.bytesWritten,
			r.iops, r.bandwidth, r.p99, r.fsync, r.json); err != nil {
			return fmt.Errorf("insert sample %d: %w", r.seq, err)
		}
	}
	return nil
}

// querySamples reads samples selected by from (a FROM ... WHERE ... ORDER
// BY clause in which the samples table is aliased s).
func querySamples(ctx context.Context, q queryer, from string, args ...any) ([]measure.Sample, error) {
	out, err := queryAll(ctx, q, `SELECT s.result_json, s.duration_seconds, s.runtime_ns `+from, args,
		func(rows *sql.Rows) (measure.Sample, error) {
			var sm measure.Sample
			var js string
			var duration sql.NullFloat64
			var runtime int64
			if err := rows.Scan(&js, &duration, &runtime); err != nil {
				return sm, err
			}
			if err := json.Unmarshal([]byte(js), &sm); err != nil {
				return sm, fmt.Errorf("decode sample: %w", err)
			}
			sm.StartedAt = sm.StartedAt.UTC()
			sm.DurationSeconds = math.NaN()
			if duration.Valid {
				sm.DurationSeconds = duration.Float64
			}
			// Runtime is not part of the sample's JSON form (json:"-").
			sm.Runtime = time.Duration(runtime)
			return sm, nil
		})
	if err != nil {
		return nil, fmt.Errorf("read samples: %w", err)
	}
	return out, nil
}

// usableSamples selects the samples whose figures may feed overhead
// estimates and the detector's baseline: those of ok cycles, and those of
// interrupted cycles in the rounds they completed. An interrupted cycle
// (the agent stopped, SIGTERM) ran its rounds in order and was cut during
// the last one, so rounds first_round .. first_round+rounds-1 are whole and
// as valid as any other; the cut round is not. Failed cycles are left out
// whole: their failures may be a sick engine or probe, not the storage.
const usableSamples = `
FROM samples s JOIN cycles c ON c.id = s.cycle_id
WHERE s.engine = ? AND s.mode = ?
  AND (c.result = 'ok'
       OR (c.result = 'interrupted' AND c.first_round > 0 AND s.round < c.first_round + c.rounds))`

// RecentSamples returns, for every workload, the samples of its last rounds
// distinct round numbers of engine and mode that hold usable samples (see
// usableSamples: ok cycles, and completed rounds of interrupted ones),
// oldest first: by round, then in the order each cycle recorded them. A
// round runs one workload, or (in stores written before rounds were per
// workload) all of them; either way each workload gets its own window.
func (s *Store) RecentSamples(ctx context.Context, engine string, mode measure.Mode, rounds int) ([]measure.Sample, error) {
	if rounds <= 0 {
		return nil, nil
	}
	out, err := querySamples(ctx, s.db, usableSamples+`
  AND EXISTS (SELECT 1 FROM (
        SELECT workload, round, ROW_NUMBER() OVER (PARTITION BY workload ORDER BY round DESC) AS n
        FROM (SELECT DISTINCT s.workload AS workload, s.round AS round `+usableSamples+`)
      ) w WHERE w.workload = s.workload AND w.round = s.round AND w.n <= ?)
ORDER BY s.round, s.cycle_id, s.seq`, engine, mode, engine, mode, rounds)
	if err != nil {
		return nil, fmt.Errorf("recent samples of %s/%s: %w", engine, mode, err)
	}
	return out, nil
}

// NextRound returns the number the next round of engine and mode should
// get: 1 + the largest round number stored, 1 when none. Every stored round
// counts, whatever its cycle's result, so that a number never names two
// rounds; so do the rounds a finished cycle declares (first_round, rounds)
// when it kept no samples of them.
func (s *Store) NextRound(ctx context.Context, engine string, mode measure.Mode) (int, error) {
	var last int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(m), 0) FROM (
	SELECT MAX(round) AS m FROM samples WHERE engine = ? AND mode = ?
	UNION ALL
	SELECT MAX(first_round + rounds - 1) FROM cycles WHERE engine = ? AND mode = ? AND first_round > 0
)`, engine, mode, engine, mode).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("next round of %s/%s: %w", engine, mode, err)
	}
	return last + 1, nil
}

// nullFloat stores NaN and ±Inf as NULL: SQLite has no NaN (it would store
// NULL anyway, silently), and sqlite3 users' aggregates skip NULLs.
func nullFloat(v float64) sql.NullFloat64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return sql.NullFloat64{}
	}
	return sql.NullFloat64{Float64: v, Valid: true}
}
