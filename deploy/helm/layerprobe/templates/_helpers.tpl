{{/* Names and labels, overridable as in prometheus-community's charts. */}}
{{- define "layerprobe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "layerprobe.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "layerprobe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "layerprobe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "layerprobe.labels" -}}
{{ include "layerprobe.selectorLabels" . }}
app.kubernetes.io/component: agent
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The pods' ServiceAccount: the chart's, or one named in serviceAccount.name. */}}
{{- define "layerprobe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "layerprobe.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/*
The agent image: [registry/]repository:tag, or @digest when set. A parent
chart's global.imageRegistry replaces image.registry, so that one value
moves every image of an umbrella chart to a mirror.
*/}}
{{- define "layerprobe.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $registry := (.Values.global).imageRegistry | default .Values.image.registry -}}
{{- if $registry -}}
{{- $repo = printf "%s/%s" $registry $repo -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The Secret names of the web configuration and the API token. */}}
{{- define "layerprobe.webConfigSecret" -}}
{{- .Values.webConfig.existingSecret | default (printf "%s-web-config" (include "layerprobe.fullname" .)) -}}
{{- end -}}

{{- define "layerprobe.apiTokenSecret" -}}
{{- .Values.apiToken.existingSecret | default (printf "%s-api-token" (include "layerprobe.fullname" .)) -}}
{{- end -}}

{{/* The scheme the agent serves: https when the web configuration has TLS. */}}
{{- define "layerprobe.scheme" -}}
{{- if and .Values.webConfig.enabled .Values.webConfig.tls -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* The engine type, checked: every template that branches on it uses this. */}}
{{- define "layerprobe.engineType" -}}
{{- if not (has .Values.engine.type (list "docker" "containerd")) -}}
{{- fail (printf "engine.type %q: want docker or containerd" .Values.engine.type) -}}
{{- end -}}
{{- .Values.engine.type -}}
{{- end -}}

{{/* The engine's socket and data root on the node, defaults by type. */}}
{{- define "layerprobe.socket" -}}
{{- if .Values.engine.socket -}}{{ .Values.engine.socket }}
{{- else if eq (include "layerprobe.engineType" .) "containerd" -}}/run/containerd/containerd.sock
{{- else -}}/var/run/docker.sock
{{- end -}}
{{- end -}}

{{/*
The directory of a Docker socket, which the pod mounts rather than the
socket itself: /run for /var/run (a symlink to it on every current
distribution, and the image's /var/run is one too).
*/}}
{{- define "layerprobe.socketDir" -}}
{{- $d := dir (include "layerprobe.socket" .) -}}
{{- if eq $d "/var/run" -}}/run{{- else -}}{{ $d }}{{- end -}}
{{- end -}}

{{- define "layerprobe.dataRoot" -}}
{{- if .Values.engine.dataRoot -}}{{ .Values.engine.dataRoot }}
{{- else if eq (include "layerprobe.engineType" .) "containerd" -}}/var/lib/containerd
{{- else -}}/var/lib/docker
{{- end -}}
{{- end -}}

{{/*
Where the host target's files go: below the data root for docker, in the
snapshotter's root for containerd (where the agent puts them, so that host
and container arms write to the same file system).
*/}}
{{- define "layerprobe.scratch" -}}
{{- if eq (include "layerprobe.engineType" .) "containerd" -}}
{{- printf "%s/io.containerd.snapshotter.v1.%s/layerprobe-scratch" (include "layerprobe.dataRoot" .) .Values.engine.snapshotter -}}
{{- else -}}
{{- printf "%s/layerprobe-scratch" (include "layerprobe.dataRoot" .) -}}
{{- end -}}
{{- end -}}

{{/* The nodes the agent runs on. */}}
{{- define "layerprobe.nodeSelector" -}}
{{- if .Values.nodeSelector -}}
{{- toYaml .Values.nodeSelector -}}
{{- else if eq (include "layerprobe.engineType" .) "containerd" -}}
layerprobe.io/containerd: "true"
{{- else -}}
layerprobe.io/docker-engine: "true"
{{- end -}}
{{- end -}}

{{/*
The engine's volumes and mounts. docker: its API socket's directory
(read-only), its data root (read-only) and the scratch directory, at the
node's paths. containerd: the
socket's directory, which holds the FIFOs of exec output that containerd's
shims open by path when it is /run/containerd (the agent's FIFO directory is
/run/containerd/fifo, mounted on its own otherwise), the root (read-only)
and the scratch directory.
*/}}
{{- define "layerprobe.engineMounts" -}}
{{- $sock := include "layerprobe.socket" . }}
{{- if eq (include "layerprobe.engineType" .) "containerd" }}
- name: engine-run
  mountPath: {{ dir $sock }}
{{- if ne (dir $sock) "/run/containerd" }}
- name: engine-fifo
  mountPath: /run/containerd/fifo
{{- end }}
{{- else }}
- name: engine-socket
  mountPath: {{ include "layerprobe.socketDir" . }}
  readOnly: true
{{- end }}
- name: engine-data-root
  mountPath: {{ include "layerprobe.dataRoot" . }}
  readOnly: true
- name: scratch
  mountPath: {{ include "layerprobe.scratch" . }}
{{- end -}}

{{- define "layerprobe.engineVolumes" -}}
{{- $sock := include "layerprobe.socket" . }}
# The engine's API: the agent creates, execs in and removes only its own
# labelled probe container, volume (docker) or snapshot and lease
# (containerd) and image, and never pulls.
# The socket's directory, not the socket: a node without the engine's
# socket starts the pod, whose agent says what is missing in its log and on
# /metrics (layerprobe_engine_up 0), where a hostPath of type Socket would
# keep the pod in ContainerCreating.
{{- if eq (include "layerprobe.engineType" .) "containerd" }}
- name: engine-run
  hostPath:
    path: {{ dir $sock }}
    type: DirectoryOrCreate
{{- if ne (dir $sock) "/run/containerd" }}
- name: engine-fifo
  hostPath:
    path: /run/containerd/fifo
    type: DirectoryOrCreate
{{- end }}
{{- else }}
{{- $dir := include "layerprobe.socketDir" . }}
- name: engine-socket
  hostPath:
    path: {{ $dir }}
    type: {{ if eq $dir "/run" }}Directory{{ else }}DirectoryOrCreate{{ end }}
{{- end }}
- name: engine-data-root
  hostPath:
    path: {{ include "layerprobe.dataRoot" . }}
    type: Directory
# Where the host target's fio files go; the bind target's source.
- name: scratch
  hostPath:
    path: {{ include "layerprobe.scratch" . }}
    type: DirectoryOrCreate
{{- end -}}

{{/*
The environment that points the agent at a Docker engine; a containerd
engine is named in the configuration (layerprobe.config).
*/}}
{{- define "layerprobe.engineEnv" -}}
{{- if eq (include "layerprobe.engineType" .) "docker" }}
- name: DOCKER_HOST
  value: {{ printf "unix://%s" (include "layerprobe.socket" .) | quote }}
{{- end }}
{{- end -}}

{{/* The agent's configuration: config, and the containerd engine. */}}
{{- define "layerprobe.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- if eq (include "layerprobe.engineType" .) "containerd" }}
{{- if not (hasKey $cfg "engines") }}
{{- $_ := set $cfg "engines" (list (dict "name" "node" "type" "containerd" "host" (printf "unix://%s" (include "layerprobe.socket" .)) "namespace" .Values.engine.namespace "snapshotter" .Values.engine.snapshotter)) }}
{{- end }}
{{- if not (hasKey $cfg "targets") }}
{{- $_ := set $cfg "targets" (list "container" "bind") }}
{{- end }}
{{- end }}
{{- toYaml $cfg }}
{{- end -}}
