#!/usr/bin/env bash
# Installs what the agent needs on the host it measures, and nothing else:
# fio, and a container engine (Debian's docker.io) only when none answers
# and none is installed. Used by `make agent` and `make run`. The test
# toolchain is scripts/install-deps.sh (`make deps-test`, run by
# `make test`). Idempotent; needs root only when something is missing.
set -euo pipefail

# An engine answers: the Docker CLI reaches DOCKER_HOST or the default
# socket, or the default socket answers Docker's /_ping (Podman's
# compatible socket linked there, a daemon without the CLI).
engine_answers() {
  if command -v docker >/dev/null && docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    return 0
  fi
  local sock=/var/run/docker.sock
  [[ -S $sock ]] && command -v curl >/dev/null && curl -sf --max-time 5 --unix-socket "$sock" http://engine/_ping >/dev/null 2>&1
}

need=()
command -v fio >/dev/null || need+=(fio)
# scripts/ensure-dockerd.sh starts an installed dockerd that does not run
# yet; an engine is installed only where there is none at all.
if ! engine_answers && ! command -v dockerd >/dev/null; then
  if [[ -n "${DOCKER_HOST:-}" ]]; then
    echo "install-agent-deps: DOCKER_HOST=$DOCKER_HOST does not answer; not installing an engine" >&2
  else
    need+=(docker.io)
  fi
fi

if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-agent-deps: missing ${need[*]}; run as root or install them: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "install-agent-deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
