#!/usr/bin/env bash
# Writes layerprobe(1), the man page the .deb installs, from the binary's own
# --help text (the root command's and every subcommand's), so that the page
# and the binary cannot disagree.
#
#   scripts/manpage.sh bin/layerprobe > layerprobe.1
set -euo pipefail

bin=${1:?usage: $0 LAYERPROBE_BINARY}
version=$("$bin" --version | sed -n '1s/^layerprobe, version \([^ ]*\).*/\1/p')
date=${SOURCE_DATE_EPOCH:+$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)}
date=${date:-$(date -u +%Y-%m-%d)}

# roff: a backslash is \e, and a line starting with . or ' is not a request.
escape() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
# The subcommands a help text lists under "Available Commands:", without
# cobra's own (help, completion).
subcommands() {
  sed -n '/^Available Commands:/,/^$/{/^  [a-z]/s/^  \([a-z-]*\).*/\1/p}' | grep -vx -e help -e completion || true
}

section() {
  local args=("$@")
  echo ".SS \"layerprobe ${args[*]}\""
  echo ".nf"
  "$bin" "${args[@]}" --help | escape
  echo ".fi"
  local sub
  for sub in $("$bin" "${args[@]}" --help | subcommands); do
    section "${args[@]}" "$sub"
  done
}

cat <<ROFF
.TH LAYERPROBE 1 "$date" "layerprobe $version" "User Commands"
.SH NAME
layerprobe \\- measure how much slower storage is inside containers than on the host
.SH SYNOPSIS
.B layerprobe
.I command
.RI [ flags ]
.SH DESCRIPTION
.nf
ROFF
"$bin" --help | escape
echo ".fi"
echo ".SH COMMANDS"
for sub in $("$bin" --help | subcommands); do
  section "$sub"
done
cat <<'ROFF'
.SH FILES
.TP
.I /etc/layerprobe/config.yaml
The configuration (built-in defaults serve for every key it leaves out).
.TP
.I /var/lib/layerprobe
The agent's state: the SQLite store of measurements and baselines.
.TP
.I /lib/systemd/system/layerprobe.service
The hardened unit that runs the agent.
.SH SEE ALSO
.BR fio (1),
.BR dockerd (8),
.BR systemctl (1).
The documentation: /usr/share/doc/layerprobe/ and https://github.com/layerprobe/layerprobe.
ROFF
