package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrations[i] brings the schema from version i to i+1. Append only: a
// released migration never changes, because databases in the field have
// already run it. docs/store.md describes the current schema for readers.
var migrations = []string{
	// v1.
	`
CREATE TABLE cycles (
	-- AUTOINCREMENT: ids of pruned cycles are never reused, so an id the API
	-- handed out never names a different cycle later.
	id             INTEGER PRIMARY KEY AUTOINCREMENT,
	engine         TEXT    NOT NULL,
	mode           TEXT    NOT NULL,
	profile        TEXT    NOT NULL DEFAULT '',
	triggered_by   TEXT    NOT NULL DEFAULT '', -- schedule, api, confirm ("trigger" is an SQL keyword)
	driver         TEXT    NOT NULL DEFAULT '',
	backing_fs     TEXT    NOT NULL DEFAULT '',
	engine_version TEXT    NOT NULL DEFAULT '',
	fio_version    TEXT    NOT NULL DEFAULT '',
	started_at     TEXT    NOT NULL,            -- UTC, 2026-03-01T12:00:00.000000000Z
	finished_at    TEXT,                        -- NULL while running
	result         TEXT    NOT NULL,            -- running, ok, failed, skipped, interrupted
	reason         TEXT    NOT NULL DEFAULT '',
	message        TEXT    NOT NULL DEFAULT '',
	first_round    INTEGER NOT NULL DEFAULT 0,
	rounds         INTEGER NOT NULL DEFAULT 0,
	bytes_written  INTEGER NOT NULL DEFAULT 0,
	results_json   TEXT    NOT NULL DEFAULT '[]' -- []report.Result, as in layerprobe run --output json
);
CREATE INDEX cycles_engine_started ON cycles (engine, started_at);
CREATE INDEX cycles_engine_result_started ON cycles (engine, result, started_at);
CREATE INDEX cycles_started ON cycles (started_at);
CREATE INDEX cycles_finished ON cycles (finished_at);
CREATE INDEX cycles_result ON cycles (result);

CREATE TABLE samples (
	id                          INTEGER PRIMARY KEY,
	cycle_id                    INTEGER NOT NULL REFERENCES cycles (id) ON DELETE CASCADE,
	seq                         INTEGER NOT NULL, -- position in the cycle's sample list
	engine                      TEXT    NOT NULL,
	mode                        TEXT    NOT NULL,
	round                       INTEGER NOT NULL, -- engine-wide round number
	ord                         INTEGER NOT NULL, -- position of the target in the round's random order
	target                      TEXT    NOT NULL,
	job                         TEXT    NOT NULL, -- renamed workload in v4
	ok                          INTEGER NOT NULL, -- 1 success, 0 failed job
	failure_reason              TEXT,             -- NULL when ok
	started_at                  TEXT    NOT NULL,
	duration_seconds            REAL,
	runtime_ns                  INTEGER NOT NULL DEFAULT 0,
	bytes_written               INTEGER NOT NULL DEFAULT 0,
	iops                        REAL,             -- read + write; NULL when failed
	bandwidth_bytes_per_second  REAL,             -- read + write; NULL when failed
	write_latency_p99_seconds   REAL,             -- NULL when failed or not reported
	fsync_p99_seconds           REAL,             -- fsync job only
	result_json                 TEXT    NOT NULL, -- the whole report.Sample
	UNIQUE (cycle_id, seq)
);
CREATE INDEX samples_engine_mode_round ON samples (engine, mode, round);

CREATE TABLE detector_state (
	engine     TEXT NOT NULL,
	mode       TEXT NOT NULL,
	target     TEXT NOT NULL,
	state_json TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (engine, mode, target)
);
`,
	// v2: the cold probe's copy-up timings, and whether the data root's
	// file system could share extents when a cold cycle ran.
	`
CREATE TABLE copyup_samples (
	id         INTEGER PRIMARY KEY,
	cycle_id   INTEGER NOT NULL REFERENCES cycles (id) ON DELETE CASCADE,
	seq        INTEGER NOT NULL, -- position in the cycle's copy-up list
	engine     TEXT    NOT NULL,
	round      INTEGER NOT NULL, -- engine-wide cold round number
	target     TEXT    NOT NULL, -- host or container
	size_bytes INTEGER NOT NULL,
	seconds    REAL,             -- NULL when the write failed
	error      TEXT    NOT NULL DEFAULT '',
	UNIQUE (cycle_id, seq)
);
CREATE INDEX copyup_samples_engine_round ON copyup_samples (engine, round);
ALTER TABLE cycles ADD COLUMN reflink INTEGER; -- cold cycles: 1 or 0; NULL unknown
`,
	// v3: rounds became adaptive; what ended a cycle's rounds.
	`
ALTER TABLE cycles ADD COLUMN stop_reason TEXT NOT NULL DEFAULT ''; -- precision, bytes, time, rounds, decided, canceled
`,
	// v4: the workload, called job before, is workload in the metrics and
	// the JSON (Prometheus has a job label of its own). The column and the
	// stored JSON follow, so that queries with ordinary tools need one name
	// (measure's decoders read the old one too). SQLite keeps the text of
	// JSON numbers, so no figure changes.
	`
ALTER TABLE samples RENAME COLUMN job TO workload;
UPDATE samples
SET result_json = json_set(json_remove(result_json, '$.job'), '$.workload', json_extract(result_json, '$.job'))
WHERE json_type(result_json, '$.job') = 'text';
UPDATE cycles
SET results_json = (
	SELECT json_group_array(CASE WHEN json_type(r.value, '$.job') = 'text'
		THEN json_set(json_remove(r.value, '$.job'), '$.workload', json_extract(r.value, '$.job'))
		ELSE json(r.value) END ORDER BY r.key)
	FROM json_each(cycles.results_json) AS r)
WHERE json_valid(results_json) AND results_json LIKE '%"job"%';
`,
	// v5: the cold probe's lookups in the cold image's tree of small
	// files: a stat walk of the tree and the first create in a directory
	// of each depth (the directory's copy-up), in the container and on the
	// host's copy.
	`
CREATE TABLE lookup_samples (
	id         INTEGER PRIMARY KEY,
	cycle_id   INTEGER NOT NULL REFERENCES cycles (id) ON DELETE CASCADE,
	seq        INTEGER NOT NULL, -- position in the cycle's lookup list
	engine     TEXT    NOT NULL,
	round      INTEGER NOT NULL, -- engine-wide cold round number
	target     TEXT    NOT NULL, -- host or container
	op         TEXT    NOT NULL, -- walk or dir_create
	entries    INTEGER NOT NULL DEFAULT 0, -- walk: entries stat'ed
	depth      INTEGER NOT NULL DEFAULT 0, -- dir_create: the directory's depth
	seconds    REAL,             -- NULL when the operation failed
	error      TEXT    NOT NULL DEFAULT '',
	UNIQUE (cycle_id, seq)
);
CREATE INDEX lookup_samples_engine_round ON lookup_samples (engine, round);
`,
}

// schemaVersion is the version this build writes and understands.
var schemaVersion = len(migrations)

// migrate applies the missing migrations, each in its own transaction
// together with its schema_version row, and returns the version reached.
// A database from a newer layerprobe is refused rather than misread.
func (s *Store) migrate(ctx context.Context) (int, error) {
	var version int
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	version    INTEGER PRIMARY KEY,
	applied_at TEXT NOT NULL
)`); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&version)
	})
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if version > schemaVersion {
		return version, fmt.Errorf("schema version %d is newer than this layerprobe understands (%d): run a newer layerprobe", version, schemaVersion)
	}
	for v := version; v < schemaVersion; v++ {
		err := s.write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`,
				v+1, formatTime(time.Now()))
			return err
		})
		if err != nil {
			return v, fmt.Errorf("migrate schema to version %d: %w", v+1, err)
		}
		s.logger.Info("store schema migrated", "version", v+1)
	}
	return schemaVersion, nil
}
