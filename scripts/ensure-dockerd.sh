#!/usr/bin/env bash
# Starts the host's Docker engine when none answers on the default socket
# (a fresh machine without systemd has none running). Used by `make agent`
# and `make run` only; the tests start their own private daemons.
set -euo pipefail
sock=/var/run/docker.sock
if [[ -n "${DOCKER_HOST:-}" ]] || { [[ -S $sock ]] && docker_ping=$(curl -fsS --unix-socket "$sock" http://d/_ping 2>/dev/null) && [[ $docker_ping == OK ]]; }; then
  exit 0
fi
if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
  systemctl start docker && exit 0
fi
echo "ensure-dockerd: starting dockerd (log: /var/log/layerprobe-dockerd.log)" >&2
nohup dockerd >/var/log/layerprobe-dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if [[ -S $sock ]] && [[ $(curl -fsS --unix-socket "$sock" http://d/_ping 2>/dev/null || true) == OK ]]; then
    exit 0
  fi
  sleep 0.5
done
echo "ensure-dockerd: dockerd did not answer on $sock within 30s; see /var/log/layerprobe-dockerd.log" >&2
exit 1
