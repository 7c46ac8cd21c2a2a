package advisor

import (
	"slices"
	"testing"
)

func TestDatabaseOf(t *testing.T) {
	for _, c := range []struct {
		image string
		env   map[string]string
		name  string
		dirs  []string
	}{
		{"postgres", nil, "postgres", []string{"/var/lib/postgresql/data"}},
		{"postgres:16-alpine", nil, "postgres", []string{"/var/lib/postgresql/data"}},
		{"docker.io/library/postgres@sha256:" + sha, nil, "postgres", []string{"/var/lib/postgresql/data"}},
		{"registry.example.com:5000/team/postgres:16", nil, "postgres", []string{"/var/lib/postgresql/data"}},
		{"postgres:18", map[string]string{"PGDATA": "/var/lib/postgresql/18/docker/"}, "postgres", []string{"/var/lib/postgresql/18/docker"}},
		{"postgres", map[string]string{"PGDATA": "relative"}, "postgres", []string{"/var/lib/postgresql/data"}},
		{"bitnami/postgresql:16", nil, "postgres", []string{"/bitnami/postgresql"}},
		{"bitnami/kafka", nil, "kafka", []string{"/bitnami/kafka"}},
		{"mysql:8", nil, "mysql", []string{"/var/lib/mysql"}},
		{"mariadb", nil, "mariadb", []string{"/var/lib/mysql"}},
		{"mongo:7", nil, "mongo", []string{"/data/db"}},
		{"valkey/valkey:8", nil, "redis", []string{"/data"}},
		{"docker.elastic.co/elasticsearch/elasticsearch:8.15.0", nil, "elasticsearch", []string{"/usr/share/elasticsearch/data"}},
		{"apache/kafka:3.8.0", nil, "kafka", []string{"/var/lib/kafka/data", "/tmp/kraft-combined-logs"}},
		{"lp-e2e/postgres:16", nil, "postgres", []string{"/var/lib/postgresql/data"}},
		{"nginx", nil, "", nil},
		{"my-postgres-exporter", nil, "", nil},
		{"sha256:" + sha, nil, "", nil},
		{sha, nil, "", nil},
		{"", nil, "", nil},
		{"Not A Valid::Ref", nil, "", nil},
	} {
		name, dirs, ok := databaseOf(c.image, c.env)
		if name != c.name || !slices.Equal(dirs, c.dirs) || ok != (c.name != "") {
			t.Errorf("databaseOf(%q, %v) = %q %v %v; want %q %v", c.image, c.env, name, dirs, ok, c.name, c.dirs)
		}
	}
	if env := databaseEnv(); !slices.Equal(env, []string{"PGDATA"}) {
		t.Errorf("databaseEnv() = %v", env)
	}
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestCovered(t *testing.T) {
	for _, c := range []struct {
		dir   string
		dests []string
		want  bool
	}{
		{"/var/lib/postgresql/data", []string{"/var/lib/postgresql/data"}, true},
		{"/var/lib/postgresql/data", []string{"/var/lib/postgresql/data/"}, true},
		{"/var/lib/postgresql/data", []string{"/var/lib/postgresql"}, true},
		{"/var/lib/postgresql/data", []string{"/var/lib/postgresql/data/pg_wal"}, false},
		{"/var/lib/postgresql/data", []string{"/var/lib/postgres"}, false},
		{"/var/lib/postgresql/data", []string{"/etc/hosts", "/run/secrets"}, false},
		{"/data", nil, false},
	} {
		if got := covered(c.dir, c.dests); got != c.want {
			t.Errorf("covered(%q, %v) = %v, want %v", c.dir, c.dests, got, c.want)
		}
	}
}
