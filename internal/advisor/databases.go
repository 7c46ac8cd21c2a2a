package advisor

import (
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// database is a known database or queue: the image names it ships under
// (the last component of the repository) and where it keeps its data.
type database struct {
	name   string
	images []string
	dirs   []string
	// env names the variable that moves the data directory (PGDATA), if
	// any; its value replaces dirs.
	env string
}

// databases are the images whose data directory belongs on a volume. The
// directories are those of the official images; Bitnami's images keep
// theirs under /bitnami/<name> (see databaseOf).
var databases = []database{
	{name: "postgres", images: []string{"postgres", "postgresql", "postgis", "timescaledb", "timescaledb-ha", "pgvector"},
		dirs: []string{"/var/lib/postgresql/data"}, env: "PGDATA"},
	{name: "mysql", images: []string{"mysql", "mysql-server", "percona", "percona-server"}, dirs: []string{"/var/lib/mysql"}},
	{name: "mariadb", images: []string{"mariadb"}, dirs: []string{"/var/lib/mysql"}},
	{name: "mongo", images: []string{"mongo", "mongodb", "mongodb-community-server"}, dirs: []string{"/data/db"}},
	{name: "redis", images: []string{"redis", "redis-stack", "redis-stack-server", "valkey", "keydb"}, dirs: []string{"/data"}},
	{name: "elasticsearch", images: []string{"elasticsearch"}, dirs: []string{"/usr/share/elasticsearch/data"}},
	{name: "opensearch", images: []string{"opensearch"}, dirs: []string{"/usr/share/opensearch/data"}},
	{name: "kafka", images: []string{"kafka", "cp-kafka", "cp-server"}, dirs: []string{"/var/lib/kafka/data", "/tmp/kraft-combined-logs"}},
	{name: "rabbitmq", images: []string{"rabbitmq"}, dirs: []string{"/var/lib/rabbitmq"}},
	{name: "cassandra", images: []string{"cassandra"}, dirs: []string{"/var/lib/cassandra"}},
	{name: "clickhouse", images: []string{"clickhouse-server", "clickhouse"}, dirs: []string{"/var/lib/clickhouse"}},
	{name: "influxdb", images: []string{"influxdb"}, dirs: []string{"/var/lib/influxdb2", "/var/lib/influxdb"}},
	{name: "couchdb", images: []string{"couchdb"}, dirs: []string{"/opt/couchdb/data"}},
	{name: "zookeeper", images: []string{"zookeeper", "cp-zookeeper"}, dirs: []string{"/data", "/datalog", "/var/lib/zookeeper/data"}},
	{name: "neo4j", images: []string{"neo4j"}, dirs: []string{"/data"}},
	{name: "minio", images: []string{"minio"}, dirs: []string{"/data"}},
}

// databaseEnv lists the environment variables the table reads.
func databaseEnv() []string {
	var out []string
	for _, d := range databases {
		if d.env != "" && !slices.Contains(out, d.env) {
			out = append(out, d.env)
		}
	}
	return out
}

// databaseOf recognises a known database or queue by its image name, and
// returns it with its data directories for this container (env holds the
// variables databaseEnv named). ok is false for any other image.
func databaseOf(image string, env map[string]string) (name string, dirs []string, ok bool) {
	repo := repository(image)
	if repo == "" {
		return "", nil, false
	}
	parts := strings.Split(repo, "/")
	last := parts[len(parts)-1]
	for _, d := range databases {
		if !slices.Contains(d.images, last) {
			continue
		}
		dirs = d.dirs
		if slices.Contains(parts[:len(parts)-1], "bitnami") {
			dirs = []string{"/bitnami/" + last}
		}
		if v := env[d.env]; d.env != "" && path.IsAbs(v) {
			dirs = []string{path.Clean(v)}
		}
		return d.name, slices.Clone(dirs), true
	}
	return "", nil, false
}

// repository is an image reference's repository path without registry,
// tag or digest ("bitnami/postgresql" of "docker.io/bitnami/postgresql:16");
// "" for an image ID or an unparsable name.
func repository(image string) string {
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	return reference.Path(ref)
}

// covered reports whether dir (inside the container) lies on one of the
// mounts' destinations, or under one.
func covered(dir string, destinations []string) bool {
	for _, d := range destinations {
		d = path.Clean(d)
		if dir == d || d == "/" || strings.HasPrefix(dir, d+"/") {
			return true
		}
	}
	return false
}
