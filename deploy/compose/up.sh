#!/usr/bin/env bash
# Brings up the whole stack on this Docker host: the layerprobe agent,
# Prometheus with the shipped rules, Alertmanager and Grafana with the
# shipped dashboards. Extra arguments go to `docker compose up`.
#
#   deploy/compose/up.sh
#
# Builds bin/layerprobe (Go >= 1.26) unless it exists, finds the engine's data
# root, then runs `docker compose up -d --build`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ ! -x $repo/bin/layerprobe ]]; then
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -tags nomsgpack -o bin/layerprobe ./cmd/layerprobe)
fi
# Compose v2: the file asks for the host's cgroup namespace (`cgroup:
# host`), which Compose 1.x rejects.
if docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif command -v docker-compose >/dev/null && [[ $(docker-compose version --short 2>/dev/null) != 1.* ]]; then
  compose=(docker-compose)
else
  echo "up.sh: needs Docker Compose v2 (the docker compose plugin, or its standalone docker-compose)" >&2
  exit 1
fi
DOCKER_DATA_ROOT=${DOCKER_DATA_ROOT:-$(docker info --format '{{.DockerRootDir}}')}
export DOCKER_DATA_ROOT
exec "${compose[@]}" -f "$here/docker-compose.yml" up -d --build "$@"
