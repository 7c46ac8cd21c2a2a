package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// cycleColumns are the columns scanCycle reads, in its order.
const cycleColumns = `id, engine, mode, profile, triggered_by, driver, backing_fs, engine_version,
	fio_version, started_at, finished_at, result, reason, message, first_round, rounds, bytes_written, reflink,
	stop_reason`

// StartCycle records c as running and sets c.ID and c.Result. A zero
// c.StartedAt is set to now.
func (s *Store) StartCycle(ctx context.Context, c *Cycle) error {
	if err := checkNew(c); err != nil {
		return fmt.Errorf("start cycle: %w", err)
	}
	if c.StartedAt.IsZero() {
		c.StartedAt = time.Now().UTC()
	}
	c.Result = ResultRunning
	c.FinishedAt = time.Time{}
	var id int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		id, err = insertCycle(ctx, tx, c, "[]")
		return err
	})
	if err != nil {
		c.Result = ""
		return fmt.Errorf("start cycle of %s: %w", c.Engine, err)
	}
	c.ID = id
	return nil
}

// ClaimRounds records, for a cycle StartCycle recorded before it knew
// them (an API trigger records its cycles at once, to answer with their
// ids), the engine facts and the round numbers it claims: first_round and
// rounds, which NextRound counts from then on, as it does a cycle started
// with them.
func (s *Store) ClaimRounds(ctx context.Context, c *Cycle) error {
	if c.ID == 0 {
		return errors.New("claim rounds: cycle was not started (id 0)")
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE cycles SET
	driver = ?, backing_fs = ?, engine_version = ?, fio_version = ?, first_round = ?, rounds = ?
WHERE id = ? AND result = ?`,
			c.Driver, c.BackingFS, c.EngineVersion, c.FioVersion, c.FirstRound, c.Rounds, c.ID, ResultRunning)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("cycle %d is not running", c.ID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("claim rounds of cycle %d: %w", c.ID, err)
	}
	return nil
}

// FinishCycle records the outcome of a cycle StartCycle recorded: result,
// reason, message, finish time, rounds, bytes, first round, engine facts,
// results, and all its samples, in one transaction, so a reader (or an
// agent restarted after a crash) sees the cycle either running without
// samples or finished with all of them. A zero c.FinishedAt is set to now.
func (s *Store) FinishCycle(ctx context.Context, c *Cycle) error {
	if c.ID == 0 {
		return errors.New("finish cycle: cycle was not started (id 0)")
	}
	if c.Result == "" || c.Result == ResultRunning {
		return fmt.Errorf("finish cycle %d: result %q is not a finished result", c.ID, c.Result)
	}
	if c.FinishedAt.IsZero() {
		c.FinishedAt = time.Now().UTC()
	}
	results, rows, err := encodeCycle(c)
	if err != nil {
		return fmt.Errorf("finish cycle %d: %w", c.ID, err)
	}
	var reflink sql.NullBool
	if c.Reflink != nil {
		reflink = sql.NullBool{Bool: *c.Reflink, Valid: true}
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE cycles SET
	driver = ?, backing_fs = ?, engine_version = ?, fio_version = ?, finished_at = ?, result = ?,
	reason = ?, message = ?, first_round = ?, rounds = ?, bytes_written = ?, results_json = ?, reflink = ?,
	stop_reason = ?
WHERE id = ? AND result = ?`,
			c.Driver, c.BackingFS, c.EngineVersion, c.FioVersion, nullTime(c.FinishedAt), c.Result,
			c.Reason, c.Message, c.FirstRound, c.Rounds, c.BytesWritten, results, reflink,
			c.StopReason, c.ID, ResultRunning)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			// Tell a missing cycle from one finished already (twice, or
			// by an Open that found it running).
			var result string
			err := tx.QueryRowContext(ctx, `SELECT result FROM cycles WHERE id = ?`, c.ID).Scan(&result)
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("cycle is %s, not running", result)
		}
		if err := insertSamples(ctx, tx, c.ID, rows); err != nil {
			return err
		}
		if err := insertCopyUp(ctx, tx, c); err != nil {
			return err
		}
		return insertLookup(ctx, tx, c)
	})
	if err != nil {
		return fmt.Errorf("finish cycle %d: %w", c.ID, err)
	}
	return nil
}

// RecordSkip records a cycle that never started measuring: it is inserted
// finished. Result defaults to "skipped"; a caller that gave up earlier for
// another reason (e.g. "failed" because the engine was unreachable) keeps
// its Result. Zero StartedAt and FinishedAt are set to now. Samples, if
// any, are stored too, in the same transaction.
func (s *Store) RecordSkip(ctx context.Context, c *Cycle) error {
	if err := checkNew(c); err != nil {
		return fmt.Errorf("record skipped cycle: %w", err)
	}
	if c.Result == "" {
		c.Result = ResultSkipped
	}
	if c.Result == ResultRunning {
		return errors.New("record skipped cycle: result running is not a finished result")
	}
	now := time.Now().UTC()
	if c.StartedAt.IsZero() {
		c.StartedAt = now
	}
	if c.FinishedAt.IsZero() {
		c.FinishedAt = now
	}
	results, rows, err := encodeCycle(c)
	if err != nil {
		return fmt.Errorf("record skipped cycle of %s: %w", c.Engine, err)
	}
	var id int64
	err = s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if id, err = insertCycle(ctx, tx, c, results); err != nil {
			return err
		}
		return insertSamples(ctx, tx, id, rows)
	})
	if err != nil {
		return fmt.Errorf("record skipped cycle of %s: %w", c.Engine, err)
	}
	c.ID = id
	return nil
}

func checkNew(c *Cycle) error {
	if c.ID != 0 {
		return fmt.Errorf("cycle already recorded as %d", c.ID)
	}
	if c.Engine == "" || c.Mode == "" {
		return fmt.Errorf("engine (%q) and mode (%q) are required", c.Engine, c.Mode)
	}
	return nil
}

func insertCycle(ctx context.Context, tx *sql.Tx, c *Cycle, results string) (int64, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO cycles (
	engine, mode, profile, triggered_by, driver, backing_fs, engine_version, fio_version,
	started_at, finished_at, result, reason, message, first_round, rounds, bytes_written, results_json,
	stop_reason
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.Engine, c.Mode, c.Profile, c.Trigger, c.Driver, c.BackingFS, c.EngineVersion, c.FioVersion,
		formatTime(c.StartedAt), nullTime(c.FinishedAt), c.Result, c.Reason, c.Message,
		c.FirstRound, c.Rounds, c.BytesWritten, results, c.StopReason)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// Cycle returns one cycle with its samples (in the order they were
// recorded) and results, or ErrNotFound.
func (s *Store) Cycle(ctx context.Context, id int64) (Cycle, error) {
	var c Cycle
	err := s.read(ctx, func(tx *sql.Tx) error {
		var results string
		row := tx.QueryRowContext(ctx, `SELECT `+cycleColumns+`, results_json FROM cycles WHERE id = ?`, id)
		var err error
		if c, err = scanCycle(row, &results); err != nil {
			return err
		}
		if c.Results, err = decodeResults(results); err != nil {
			return err
		}
		c.Samples, err = querySamples(ctx, tx, `FROM samples s WHERE s.cycle_id = ? ORDER BY s.seq`, id)
		if err != nil {
			return err
		}
		c.CopyUp, err = queryCopyUp(ctx, tx, `FROM copyup_samples x WHERE x.cycle_id = ? ORDER BY x.seq`, id)
		if err != nil {
			return err
		}
		c.Lookup, err = queryLookup(ctx, tx, `FROM lookup_samples x WHERE x.cycle_id = ? ORDER BY x.seq`, id)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Cycle{}, fmt.Errorf("cycle %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Cycle{}, fmt.Errorf("read cycle %d: %w", id, err)
	}
	return c, nil
}

// Cycles lists cycles newest first (by start time), without samples and
// results: listing stays cheap however large the cycles are.
func (s *Store) Cycles(ctx context.Context, q Query) ([]Cycle, error) {
	if q.Limit < 0 {
		return nil, fmt.Errorf("list cycles: negative limit %d", q.Limit)
	}
	if q.Limit == 0 {
		q.Limit = defaultLimit
	}
	var where []string
	var args []any
	if q.Engine != "" {
		where = append(where, "engine = ?")
		args = append(args, q.Engine)
	}
	if !q.Since.IsZero() {
		where = append(where, "started_at >= ?")
		args = append(args, formatTime(q.Since))
	}
	query := `SELECT ` + cycleColumns + ` FROM cycles`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY started_at DESC, id DESC LIMIT ?`
	args = append(args, q.Limit)

	out, err := queryAll(ctx, s.db, query, args, func(rows *sql.Rows) (Cycle, error) { return scanCycle(rows, nil) })
	if err != nil {
		return nil, fmt.Errorf("list cycles: %w", err)
	}
	return out, nil
}

// LatestCycle returns the newest cycle of engine with that result ("" =
// any result; engine "" = any engine), with its Results but without
// samples, or ErrNotFound.
func (s *Store) LatestCycle(ctx context.Context, engine string, result string) (Cycle, error) {
	return s.LatestCycleOf(ctx, engine, "", result)
}

// LatestCycleOf is LatestCycle restricted to one mode ("" = any mode).
func (s *Store) LatestCycleOf(ctx context.Context, engine string, mode measure.Mode, result string) (Cycle, error) {
	query := `SELECT ` + cycleColumns + `, results_json FROM cycles WHERE 1`
	var args []any
	if engine != "" {
		query += ` AND engine = ?`
		args = append(args, engine)
	}
	if mode != "" {
		query += ` AND mode = ?`
		args = append(args, mode)
	}
	if result != "" {
		query += ` AND result = ?`
		args = append(args, result)
	}
	query += ` ORDER BY started_at DESC, id DESC LIMIT 1`
	var results string
	c, err := scanCycle(s.db.QueryRowContext(ctx, query, args...), &results)
	if errors.Is(err, sql.ErrNoRows) {
		return Cycle{}, fmt.Errorf("latest cycle of %q with result %q: %w", engine, result, ErrNotFound)
	}
	if err == nil {
		c.Results, err = decodeResults(results)
	}
	if err != nil {
		return Cycle{}, fmt.Errorf("latest cycle of %q: %w", engine, err)
	}
	return c, nil
}

// BytesWrittenSince sums the bytes written by the cycles of engine ("" =
// every engine) started at or after since: the daily byte budget.
func (s *Store) BytesWrittenSince(ctx context.Context, engine string, since time.Time) (int64, error) {
	query := `SELECT COALESCE(SUM(bytes_written), 0) FROM cycles WHERE started_at >= ?`
	args := []any{formatTime(since)}
	if engine != "" {
		query += ` AND engine = ?`
		args = append(args, engine)
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("bytes written by %q since %s: %w", engine, formatTime(since), err)
	}
	return n, nil
}

// Prune deletes the cycles that finished before before, with their samples
// (ON DELETE CASCADE), and returns how many cycles it deleted. Running
// cycles are never pruned. Detector states are kept: they are the baseline,
// not history. Freed pages are reused by later cycles; the file does not
// shrink (no VACUUM, which would rewrite the whole file).
func (s *Store) Prune(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM cycles WHERE finished_at IS NOT NULL AND finished_at < ?`, formatTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune cycles finished before %s: %w", formatTime(before), err)
	}
	if n > 0 {
		s.logger.Debug("pruned cycles", "cycles", n, "before", before)
	}
	return int(n), nil
}

// Counts returns the number of cycles of engine ("" = every engine) per
// result.
func (s *Store) Counts(ctx context.Context, engine string) (map[string]int64, error) {
	query := `SELECT result, COUNT(*) FROM cycles`
	var args []any
	if engine != "" {
		query += ` WHERE engine = ?`
		args = append(args, engine)
	}
	query += ` GROUP BY result`
	type count struct {
		result string
		n      int64
	}
	counts, err := queryAll(ctx, s.db, query, args, func(rows *sql.Rows) (count, error) {
		var c count
		return c, rows.Scan(&c.result, &c.n)
	})
	if err != nil {
		return nil, fmt.Errorf("count cycles of %q: %w", engine, err)
	}
	out := make(map[string]int64, len(counts))
	for _, c := range counts {
		out[c.result] = c.n
	}
	return out, nil
}

type scanner interface{ Scan(dest ...any) error }

// scanCycle reads cycleColumns and, when results is not nil, one more
// column into it.
func scanCycle(sc scanner, results *string) (Cycle, error) {
	var c Cycle
	var started, finished sql.NullString
	var reflink sql.NullBool
	dest := []any{&c.ID, &c.Engine, &c.Mode, &c.Profile, &c.Trigger, &c.Driver, &c.BackingFS,
		&c.EngineVersion, &c.FioVersion, &started, &finished, &c.Result, &c.Reason, &c.Message,
		&c.FirstRound, &c.Rounds, &c.BytesWritten, &reflink, &c.StopReason}
	if results != nil {
		dest = append(dest, results)
	}
	if err := sc.Scan(dest...); err != nil {
		return Cycle{}, err
	}
	if reflink.Valid {
		c.Reflink = &reflink.Bool
	}
	var err error
	if c.StartedAt, err = parseTime(started); err != nil {
		return Cycle{}, fmt.Errorf("cycle %d: %w", c.ID, err)
	}
	if c.FinishedAt, err = parseTime(finished); err != nil {
		return Cycle{}, fmt.Errorf("cycle %d: %w", c.ID, err)
	}
	return c, nil
}

// encodeCycle encodes a cycle's results and samples before its write
// transaction begins, so that the transaction only executes statements.
func encodeCycle(c *Cycle) (results string, samples []sampleRow, err error) {
	if results, err = encodeResults(c.Results); err != nil {
		return "", nil, err
	}
	if samples, err = encodeSamples(c); err != nil {
		return "", nil, err
	}
	return results, samples, nil
}

// Results are stored as one JSON array per cycle (results_json), in the
// same form as `layerprobe run --output json`: they are always read whole
// with their cycle, sqlite3 users reach into them with json_each and
// json_extract, and measure.Result can gain fields without a migration.
func encodeResults(rs []measure.Result) (string, error) {
	if len(rs) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	return string(b), nil
}

func decodeResults(s string) ([]measure.Result, error) {
	var rs []measure.Result
	if err := json.Unmarshal([]byte(s), &rs); err != nil {
		return nil, fmt.Errorf("decode results: %w", err)
	}
	if len(rs) == 0 {
		return nil, nil
	}
	return rs, nil
}
