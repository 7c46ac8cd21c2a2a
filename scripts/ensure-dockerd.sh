#!/usr/bin/env bash
# Starts the host's Docker engine when none answers (a fresh machine without
# systemd has none running). Used by `make agent` and `make run` only; the
# tests start their own private daemons.
set -euo pipefail
# The engine answers: through the Docker CLI, or (an engine without the CLI,
# such as Podman's compatible socket) the default socket's /_ping.
answers() {
  if command -v docker >/dev/null && docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    return 0
  fi
  [[ -z "${DOCKER_HOST:-}" && -S /var/run/docker.sock ]] && command -v curl >/dev/null &&
    curl -sf --max-time 5 --unix-socket /var/run/docker.sock http://engine/_ping >/dev/null 2>&1
}
if answers; then
  exit 0
fi
if [[ -n "${DOCKER_HOST:-}" ]]; then
  echo "ensure-dockerd: DOCKER_HOST=$DOCKER_HOST does not answer" >&2
  exit 1
fi
if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
  systemctl start docker
  exit 0
fi
echo "ensure-dockerd: starting dockerd (log: /var/log/layerprobe-dockerd.log)" >&2
nohup dockerd >/var/log/layerprobe-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if answers; then
    exit 0
  fi
  sleep 0.5
done
echo "ensure-dockerd: dockerd did not answer within 30s; see /var/log/layerprobe-dockerd.log" >&2
exit 1
