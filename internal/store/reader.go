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
)

// OpenReader opens the store in dir for reading, beside the agent that
// may hold it: no lock, no migration, no recovery, and a read-only
// connection (query_only), so nothing a reader does can change what the
// agent wrote. `layerprobe advise` reads the measured rounds this way. A
// directory without a database is ErrNotFound; a database of another
// schema version is refused rather than misread.
func OpenReader(dir string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	path := filepath.Join(dir, DBFile)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open store %s for reading: %w", path, ErrNotFound)
		}
		return nil, fmt.Errorf("open store %s for reading: %w", path, err)
	}
	u := url.URL{Path: path}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_query_only", "1")
	db, err := sql.Open("sqlite", "file:"+u.EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s for reading: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &Store{dir: dir, path: path, db: db, logger: logger.With("store", path)}
	var version int
	err = db.QueryRowContext(context.Background(), `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&version)
	if err == nil && version != schemaVersion {
		err = fmt.Errorf("schema version %d, this layerprobe reads %d: use the agent's own layerprobe", version, schemaVersion)
	}
	if err != nil {
		_ = db.Close()
		return nil, s.openError(err)
	}
	return s, nil
}
