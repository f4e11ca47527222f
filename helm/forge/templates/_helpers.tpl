{{/* Names: "<release>-forge" unless the release name already says forge, or fullnameOverride. */}}
{{- define "forge.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The name of one component's objects: "<fullname>-coordinator" and so on. */}}
{{- define "forge.componentName" -}}
{{- printf "%s-%s" (include "forge.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries; pass (dict "root" $ "component" "coordinator"). */}}
{{- define "forge.labels" -}}
{{ include "forge.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels a component's selectors match; they never change across upgrades. */}}
{{- define "forge.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image reference; pass (dict "root" $ "image" .Values.coordinator.image). */}}
{{- define "forge.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion -}}
{{- if .root.Values.image.registry -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Where the coordinator finds Redis: the chart's own, or an external one. */}}
{{- define "forge.redisHost" -}}
{{- if .Values.redis.enabled -}}
{{- include "forge.componentName" (dict "root" . "component" "redis") -}}
{{- else -}}
{{- required "redis.external.host is required when redis.enabled is false" .Values.redis.external.host -}}
{{- end -}}
{{- end -}}

{{- define "forge.redisPort" -}}
{{- if .Values.redis.enabled -}}6379{{- else -}}{{ .Values.redis.external.port }}{{- end -}}
{{- end -}}

{{/* The Secret holding the Redis password, when Redis has one. */}}
{{- define "forge.redisSecretName" -}}
{{- .Values.redis.auth.existingSecret | default (include "forge.componentName" (dict "root" . "component" "redis")) -}}
{{- end -}}

{{/* The coordinator's gRPC address as workers and in-cluster clients reach it. */}}
{{- define "forge.coordinatorAddress" -}}
{{- printf "%s:%d" (include "forge.componentName" (dict "root" . "component" "coordinator")) (int .Values.coordinator.grpcPort) -}}
{{- end -}}

{{/* Pod annotations for Prometheus setups that discover pods by annotation; pass
(dict "root" $ "port" N). Empty when metrics.podAnnotations is off. */}}
{{- define "forge.scrapeAnnotations" -}}
{{- if .root.Values.metrics.podAnnotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end -}}
{{- end -}}

{{/* The security settings every Forge container runs with (the images' user is 10001). */}}
{{- define "forge.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
{{- end -}}

{{/*
A value of .Values.*.config as a config-file string. Helm reads every YAML number as a float64,
whose toString of 1000000 is "1e+06", which no integer key parses: whole numbers are written as
integers.
*/}}
{{- define "forge.configValue" -}}
{{- if and (kindIs "float64" .) (eq . (. | int64 | float64)) -}}
{{- . | int64 | toString | quote -}}
{{- else -}}
{{- . | toString | quote -}}
{{- end -}}
{{- end -}}
