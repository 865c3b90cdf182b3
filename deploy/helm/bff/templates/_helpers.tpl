{{/*
The chart's name, and the release's full name: the release name alone when it already holds the
chart's name ("bff", "bff-eu"), else "<release>-bff". Both are DNS labels (63 characters).
*/}}
{{- define "bff.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "bff.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "bff.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "bff.selectorLabels" . }}
app.kubernetes.io/version: {{ include "bff.version" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: bff
{{- end }}

{{/* The labels that select the BFF's pods: they never change after the first install. */}}
{{- define "bff.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bff.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "bff.version" -}}
{{- default .Chart.AppVersion .Values.image.tag | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "bff.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "bff.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "bff.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The config file: .Values.config with the keys the chart owns set by the chart: the listeners
(which the container's ports match) and the paths of the Secret's mounted files.
*/}}
{{- define "bff.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $_ := set $cfg "listen" (printf ":%d" (int .Values.ports.http)) }}
{{- $_ = set $cfg "admin_listen" (printf ":%d" (int .Values.ports.admin)) }}
{{- $upstream := default dict (get $cfg "upstream") }}
{{- $_ = set $upstream "client_secret_file" "/run/secrets/bff/upstream_client_secret" }}
{{- $_ = set $cfg "upstream" $upstream }}
{{- if .Values.secrets.keys.adminToken }}
{{- $_ = set $cfg "admin_token_file" "/run/secrets/bff/admin_token" }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The OpenTelemetry SDK's standard variables (docs/operations.md, "Tracing"). Headers (an API key
of a hosted collector) come from a Secret, never from values.
*/}}
{{- define "bff.otelEnv" -}}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ required "otel.endpoint is required when otel.enabled is true" .Values.otel.endpoint | quote }}
{{- with .Values.otel.protocol }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ . | quote }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ default (include "bff.fullname" .) .Values.otel.serviceName | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .Values.otel.sampler | quote }}
{{- with .Values.otel.samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
- name: K8S_POD_NAME
  valueFrom:
    fieldRef: {fieldPath: metadata.name}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=%s%s" .Release.Namespace (ternary (printf ",%s" .Values.otel.resourceAttributes) "" (ne .Values.otel.resourceAttributes "")) | quote }}
{{- if .Values.otel.headersSecret.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef: {name: {{ .Values.otel.headersSecret.name }}, key: {{ required "otel.headersSecret.key" .Values.otel.headersSecret.key }}}
{{- end }}
{{- end }}

{{/*
The environment variables taken from the Secret: [name, key] pairs, for the keys that are set.
The upstream client secret and the admin token are files instead (rotation without a restart).
*/}}
{{- define "bff.secretEnv" -}}
{{- $k := .Values.secrets.keys }}
{{- $pairs := list }}
{{- range $name, $key := dict "BFF_REDIS_URL" $k.redisURL "BFF_REDIS_PASSWORD" $k.redisPassword "BFF_REDIS_SENTINEL_PASSWORD" $k.redisSentinelPassword "BFF_REDIS_ENCRYPTION_KEY" $k.redisEncryptionKey "BFF_SESSION_KEYS" $k.sessionKeys "BFF_AUTH_OIDC_CLIENT_SECRET" $k.oidcClientSecret "BFF_LEDGER_POSTGRES_URL" $k.ledgerPostgresURL }}
{{- if $key }}
{{- $pairs = append $pairs (list $name $key) }}
{{- end }}
{{- end }}
{{- toYaml $pairs }}
{{- end }}
