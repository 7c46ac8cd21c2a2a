// Package store is the agent's embedded store: every measurement cycle with
// its raw fio figures and the overheads computed at its end, plus the fsync
// regression detector's state, in one SQLite file (modernc.org/sqlite, pure
// Go) that survives restarts and that anyone can read with the ordinary
// sqlite3 tool. docs/store.md describes the file for its readers.
//
// Durability. The database runs in WAL mode with synchronous=NORMAL. A
// commit appends the transaction to the WAL with write(2) and returns
// without fsync: once a method returns, the data is in the kernel and
// survives the agent being killed (SIGKILL, OOM killer, panic); the next
// Open replays the WAL. Only a power loss or a kernel crash can lose the
// transactions committed since the last checkpoint, and even then the
// database stays consistent. synchronous=FULL would fsync the WAL at every
// commit; we do not pay for that because the store usually lives on the
// same file system as the engine's data root, whose fsync latency the agent
// measures, and because a lost cycle record costs one cycle of history,
// never a wrong figure.
//
// One process at a time. Open takes an exclusive flock on agent.lock in the
// state directory before it touches the database, so two agents can never
// interleave cycles, round numbers or detector states. Readers such as the
// sqlite3 tool need no lock: WAL lets them read while the agent writes.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/layerprobe/layerprobe/internal/hostfs"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// Errors callers test with errors.Is.
var (
	// ErrNotFound: no cycle with that id, no cycle matching, no detector
	// state saved.
	ErrNotFound = errors.New("not found")
	// ErrLocked: another process holds the state directory's lock.
	ErrLocked = errors.New("state directory in use by another layerprobe agent")
	// ErrCorrupt: the database file failed its integrity check or is not a
	// SQLite database. The file is left where it is.
	ErrCorrupt = errors.New("database is corrupt")
)

// File names inside the state directory.
const (
	DBFile   = "layerprobe.db"
	LockFile = "agent.lock"
)

// Cycle results. The agent owns the vocabulary; the store only needs to
// know "running" (set by StartCycle, recovered by Open), "skipped" (the
// default of RecordSkip) and which results carry usable samples.
const (
	ResultRunning     = "running"
	ResultOK          = "ok"
	ResultSkipped     = "skipped"
	ResultInterrupted = "interrupted"
)

// What Open writes into a cycle an earlier agent left running.
const (
	interruptedReason  = "interrupted"
	interruptedMessage = "agent stopped during the cycle"
)

// defaultLimit is what Cycles returns when Query.Limit is 0.
const defaultLimit = 100

// busyTimeout is how long a statement waits for a lock held by another
// connection (a checkpoint, a sqlite3 user) before failing with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// Cycle is one measurement cycle of one engine: a few rounds, each running
// every fio job on every target.
type Cycle struct {
	ID                                           int64
	Engine                                       string
	Mode                                         measure.Mode
	Profile                                      string
	Trigger                                      string // schedule, api, confirm
	Driver, BackingFS, EngineVersion, FioVersion string
	StartedAt, FinishedAt                        time.Time // UTC; FinishedAt zero while running
	Result                                       string    // running, ok, failed, skipped, interrupted
	Reason                                       string    // fixed small set, e.g. unreachable, busy_io_pressure, interrupted
	Message                                      string
	// FirstRound is the engine-wide number of this cycle's first round:
	// rounds are numbered across cycles (see NextRound).
	FirstRound   int
	Rounds       int // rounds completed
	BytesWritten int64
	// StopReason says what ended the cycle's rounds.
	StopReason measure.StopReason
	Samples    []measure.Sample // raw fio figures, one per (round, target, workload)
	Results    []measure.Result // overheads computed at the end of the cycle
	// Cold cycles only: the copy-up timings, and whether the data root's
	// file system shares extents (nil: unknown).
	CopyUp  []measure.CopyUpSample
	Reflink *bool
	// Cold cycles only: the stat walks and first creates in the cold
	// image's tree (schema 5; none before).
	Lookup []measure.LookupSample
}

// Query filters Cycles. Zero values mean no filter; Limit 0 means 100.
type Query struct {
	Engine string
	Since  time.Time // cycles started at or after Since
	Limit  int
}

// Store is the open state directory. Its methods are safe for concurrent use.
type Store struct {
	dir    string
	path   string
	db     *sql.DB
	lock   *hostfs.Lock
	logger *slog.Logger

	// writeMu serialises this process's write transactions, so that they
	// queue in Go rather than in SQLite's busy handler, which polls with
	// sleeps. busy_timeout still covers locks taken by other processes.
	writeMu sync.Mutex

	closeOnce sync.Once
	closeErr  error
}

// Open opens the store in dir, creating dir (0700) and the database when
// missing. It holds dir/agent.lock until Close: while another process holds
// it, Open fails with an error wrapping ErrLocked and never touches the
// database. Open checks the database's integrity (PRAGMA quick_check) and
// fails with ErrCorrupt, leaving the file in place, when the check fails;
// it migrates the schema, and marks the cycles an earlier agent left
// running as interrupted.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if dir == "" {
		return nil, errors.New("open store: state directory not set")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: create state directory %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	path := filepath.Join(dir, DBFile)
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		lock.Unlock()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// A handful of connections is plenty: one writer at a time (writeMu)
	// and a few concurrent readers (HTTP API, metrics).
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)

	s := &Store{dir: dir, path: path, db: db, lock: lock, logger: logger.With("store", path)}
	if err := s.init(context.Background()); err != nil {
		_ = db.Close()
		lock.Unlock()
		return nil, err
	}
	return s, nil
}

// dsn builds the connection string. The pragmas are applied to every
// connection the pool opens, which matters for the per-connection ones
// (busy_timeout, foreign_keys, synchronous). _txlock=immediate makes write
// transactions take the write lock at BEGIN: a deferred transaction that
// upgrades from reader to writer can fail with SQLITE_BUSY at once, without
// waiting, when another connection writes. Read-only transactions stay
// deferred.
func dsn(path string) string {
	u := url.URL{Path: path}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_foreign_keys", "1")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	return "file:" + u.EscapedPath() + "?" + q.Encode()
}

func (s *Store) init(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return s.openError(err)
	}
	if err := s.quickCheck(ctx); err != nil {
		return err
	}
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return s.openError(err)
	}
	if !strings.EqualFold(mode, "wal") {
		// SQLite keeps the old mode when it cannot switch (e.g. a file
		// system without shared memory). Still crash safe with a rollback
		// journal, but readers then block the agent's writes.
		s.logger.Warn("store is not in WAL mode", "journal_mode", mode)
	}
	version, err := s.migrate(ctx)
	if err != nil {
		return s.openError(err)
	}
	n, err := s.recoverRunning(ctx)
	if err != nil {
		return s.openError(err)
	}
	if n > 0 {
		s.logger.Warn("marked cycles left running by a stopped agent as interrupted", "cycles", n)
	}
	s.logger.Debug("store opened", "schema_version", version)
	return nil
}

// openError wraps a failure of Open, classifying corruption so that the
// operator learns the file is damaged, not that the agent is broken.
func (s *Store) openError(err error) error {
	if isCorrupt(err) {
		return fmt.Errorf("open store %s: %w: %w; the file was left in place: restore it from a backup, or move it aside to start a new history", s.path, ErrCorrupt, err)
	}
	return fmt.Errorf("open store %s: %w", s.path, err)
}

// quickCheck runs PRAGMA quick_check, which reads every page and checks the
// b-tree structure (but not index contents: integrity_check would, at
// several times the cost). Time is linear in the file size; for the
// megabytes a store holds it is a fraction of a second at startup.
func (s *Store) quickCheck(ctx context.Context) error {
	const maxProblems = 5 // enough to recognise the damage; the rest is noise in a log line
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf("PRAGMA quick_check(%d)", maxProblems+1))
	if err != nil {
		return s.openError(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return s.openError(err)
		}
		for line := range strings.Lines(text) {
			line = strings.TrimSpace(line)
			if line != "ok" && line != "" && !strings.HasPrefix(line, "***") {
				problems = append(problems, line)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return s.openError(err)
	}
	if len(problems) == 0 {
		return nil
	}
	if len(problems) > maxProblems {
		problems = append(problems[:maxProblems], "...")
	}
	return fmt.Errorf("open store %s: %w: quick_check: %s; the file was left in place: restore it from a backup, or move it aside to start a new history",
		s.path, ErrCorrupt, strings.Join(problems, "; "))
}

func isCorrupt(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	// Codes may be extended (SQLITE_CORRUPT_INDEX, ...): the primary code
	// is the low byte.
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// recoverRunning marks the cycles an earlier agent left running as
// interrupted. The moment it stopped is unknown, so finished_at is set to
// started_at: the cycle reads as lasting zero seconds rather than an
// invented length, and Prune can age it out.
func (s *Store) recoverRunning(ctx context.Context) (int64, error) {
	res, err := s.db.ExecContext(ctx,
		`UPDATE cycles SET result = ?, reason = ?, message = ?, finished_at = started_at WHERE result = ?`,
		ResultInterrupted, interruptedReason, interruptedMessage, ResultRunning)
	if err != nil {
		return 0, fmt.Errorf("recover running cycles: %w", err)
	}
	return res.RowsAffected()
}

// lockDir takes the state directory's lock without waiting. While another
// process holds it, the error wraps ErrLocked and names the lock file and
// the holder's pid.
func lockDir(dir string) (*hostfs.Lock, error) {
	l, err := hostfs.TryLock(filepath.Join(dir, LockFile))
	var held *hostfs.LockedError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("%w (%s, lock file %s)", ErrLocked, held.Holder, held.Path)
	}
	return l, err
}

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database and releases the state directory's lock. The
// last connection to close checkpoints the WAL into the database file, so
// a copy of layerprobe.db alone holds everything afterwards. Close is
// idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		err := s.db.Close()
		if err != nil {
			err = fmt.Errorf("close store %s: %w", s.path, err)
		}
		// Release the lock only after the database is closed: a new agent
		// must not open it while this one may still be checkpointing. A
		// reader holds none.
		if s.lock == nil {
			s.closeErr = err
			return
		}
		if lerr := s.lock.Unlock(); lerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: release lock: %w", lerr))
		}
		s.closeErr = err
	})
	return s.closeErr
}

// queryer runs queries: the database or a transaction.
type queryer interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// queryAll runs query and reads every row it returns with scan.
func queryAll[T any](ctx context.Context, q queryer, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// write runs fn in one write transaction, serialised with this process's
// other writes, and commits when fn returns nil.
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// read runs fn in one read-only transaction: a consistent snapshot across
// several queries, taken without blocking the writer (WAL).
func (s *Store) read(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return fn(tx)
}

// Timestamps are stored as UTC text of fixed width with nanoseconds, e.g.
// 2026-03-01T12:00:00.000000000Z: readable in sqlite3, accepted by its date
// functions, and ordered the same as text and as time (RFC3339Nano trims
// trailing zeros, which would break text ordering).
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) sql.NullString {
	if t.IsZero() {
		return sql.NullString{}
	}
	return sql.NullString{String: formatTime(t), Valid: true}
}

func parseTime(s sql.NullString) (time.Time, error) {
	if !s.Valid || s.String == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse time %q: %w", s.String, err)
	}
	return t.UTC(), nil
}
