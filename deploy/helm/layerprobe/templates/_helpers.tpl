{{/* Names and labels. */}}
{{- define "layerprobe.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "layerprobe.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "layerprobe.labels" -}}
{{ include "layerprobe.selectorLabels" . }}
app.kubernetes.io/component: agent
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
The engine's volumes and mounts, by engine type. Each type mounts its API
socket and its data root at the node's paths, and the scratch directory
below the data root. A new engine type adds a branch to both.
*/}}
{{- define "layerprobe.engineMounts" -}}
{{- if eq .Values.engine.type "docker" }}
- name: engine-socket
  mountPath: {{ .Values.engine.socket }}
- name: engine-data-root
  mountPath: {{ .Values.engine.dataRoot }}
  readOnly: true
- name: scratch
  mountPath: {{ printf "%s/layerprobe-scratch" .Values.engine.dataRoot }}
{{- else }}
{{- fail (printf "engine.type %q: want docker" .Values.engine.type) }}
{{- end }}
{{- end -}}

{{- define "layerprobe.engineVolumes" -}}
{{- if eq .Values.engine.type "docker" }}
# The engine's API: the agent creates, execs in and removes only its own
# labelled probe container, volume and image, and never pulls.
- name: engine-socket
  hostPath:
    path: {{ .Values.engine.socket }}
    type: Socket
- name: engine-data-root
  hostPath:
    path: {{ .Values.engine.dataRoot }}
    type: Directory
# Where the host target's fio files go; the bind target's source.
- name: scratch
  hostPath:
    path: {{ printf "%s/layerprobe-scratch" .Values.engine.dataRoot }}
    type: DirectoryOrCreate
{{- end }}
{{- end -}}

{{/* The environment that points the agent at the engine. */}}
{{- define "layerprobe.engineEnv" -}}
{{- if eq .Values.engine.type "docker" }}
- name: DOCKER_HOST
  value: {{ printf "unix://%s" .Values.engine.socket | quote }}
{{- end }}
{{- end -}}
