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

{{/*
The labels that select the BFF's pods. A Deployment's selector cannot change after the first
install: nameOnlySelector keeps the one of the manifests that came before the chart.
*/}}
{{- define "bff.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bff.name" . }}
{{- if not .Values.nameOnlySelector }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- end }}

{{/* Labels on every object but those the selector already holds. */}}
{{- define "bff.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "bff.selectorLabels" . }}
{{- if .Values.nameOnlySelector }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
app.kubernetes.io/version: {{ include "bff.version" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: bff
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
  value: {{ .Values.otel.serviceName | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .Values.otel.sampler | quote }}
{{- with .Values.otel.samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ toString . | quote }}
{{- end }}
- name: K8S_POD_NAME
  valueFrom:
    fieldRef: {fieldPath: metadata.name}
- name: K8S_NAMESPACE_NAME
  valueFrom:
    fieldRef: {fieldPath: metadata.namespace}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ printf "k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE_NAME)%s" (ternary (printf ",%s" .Values.otel.resourceAttributes) "" (ne .Values.otel.resourceAttributes "")) | quote }}
{{- if .Values.otel.headersSecret.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef: {name: {{ .Values.otel.headersSecret.name | quote }}, key: {{ required "otel.headersSecret.key" .Values.otel.headersSecret.key | quote }}}
{{- end }}
{{- end }}

{{/*
The environment variables taken from the Secret: [name, key] pairs, for the keys that are set.
The upstream client secret and the admin token are files instead (the client secret is re-read
on rotation; the admin token is read at start).
*/}}
{{- define "bff.secretEnv" -}}
{{- $k := .Values.secrets.keys }}
{{- $pairs := list }}
{{- range $name, $key := dict "BFF_REDIS_URL" $k.redisURL "BFF_REDIS_PASSWORD" $k.redisPassword "BFF_REDIS_SENTINEL_PASSWORD" $k.redisSentinelPassword "BFF_REDIS_ENCRYPTION_KEY" $k.redisEncryptionKey "BFF_SESSION_KEYS" $k.sessionKeys "BFF_AUTH_OIDC_CLIENT_SECRET" $k.oidcClientSecret "BFF_LEDGER_POSTGRES_URL" $k.ledgerPostgresURL "BFF_PAYMENTS_WEBHOOK_SECRETS" $k.paymentsWebhookSecrets }}
{{- if $key }}
{{- $pairs = append $pairs (list $name $key) }}
{{- end }}
{{- end }}
{{- toYaml $pairs }}
{{- end }}

{{/*
Peers of a NetworkPolicy rule, never empty: an empty or null list would admit everyone.
Call with (list "the values' path" $peers).
*/}}
{{- define "bff.peers" -}}
{{- $path := index . 0 }}
{{- $peers := index . 1 }}
{{- if not $peers }}
{{- fail (printf "%s is empty: a NetworkPolicy rule without peers admits every address; name them, or set networkPolicy.enabled=false" $path) }}
{{- end }}
{{- toYaml $peers }}
{{- end }}

{{- define "bff.ports" -}}
{{- $path := index . 0 }}
{{- $ports := index . 1 }}
{{- if not $ports }}
{{- fail (printf "%s is empty: a NetworkPolicy rule without ports admits every port" $path) }}
{{- end }}
{{- range $i, $p := $ports }}
{{- if $i }}{{ "\n" }}{{ end }}- {protocol: TCP, port: {{ $p }}}
{{- end }}
{{- end }}

{{/* A Go duration of the config ("1m30s", "500ms") in seconds, rounded up. */}}
{{- define "bff.seconds" -}}
{{- $ms := 0 }}
{{- range regexFindAll "[0-9]+(ms|h|m|s)" (toString .) -1 }}
{{- $n := regexFind "^[0-9]+" . | atoi }}
{{- if hasSuffix "ms" . }}{{ $ms = add $ms $n }}
{{- else if hasSuffix "h" . }}{{ $ms = add $ms (mul $n 3600000) }}
{{- else if hasSuffix "m" . }}{{ $ms = add $ms (mul $n 60000) }}
{{- else }}{{ $ms = add $ms (mul $n 1000) }}
{{- end }}
{{- end }}
{{- div (add $ms 999) 1000 }}
{{- end }}

{{/*
What a wrong combination of values would break quietly, refused at render time.
*/}}
{{- define "bff.checks" -}}
{{- $k := .Values.secrets.keys }}
{{- if eq (toString (default "production" .Values.config.env)) "production" }}
{{- range $key := list "redisEncryptionKey" "sessionKeys" "ledgerPostgresURL" }}
{{- if not (index $k $key) }}
{{- fail (printf "secrets.keys.%s: production needs it (the BFF refuses to start without it)" $key) }}
{{- end }}
{{- end }}
{{- if and (not $k.adminToken) (not .Values.config.admin_mutations_disabled) }}
{{- fail "secrets.keys.adminToken: production needs it (without it an operator cannot end a user's sessions), or config.admin_mutations_disabled: true to run without it on purpose" }}
{{- end }}
{{- end }}
{{- $redis := default dict .Values.config.redis }}
{{- $sentinel := get $redis "sentinel" }}
{{- $cluster := get $redis "cluster_addrs" }}
{{- if and (not $k.redisURL) (not $sentinel) (not $cluster) }}
{{- fail "secrets.keys.redisURL: needed unless config.redis.sentinel or config.redis.cluster_addrs is set (without it the BFF would dial Redis on its own loopback)" }}
{{- end }}
{{- if and $k.redisURL (or $sentinel $cluster) }}
{{- fail "secrets.keys.redisURL: set it to \"\" with config.redis.sentinel or config.redis.cluster_addrs (the BFF refuses a URL with either)" }}
{{- end }}
{{- $grace := int .Values.terminationGracePeriodSeconds }}
{{- $delay := include "bff.seconds" (default "5s" .Values.config.shutdown_delay) | int }}
{{- $drain := include "bff.seconds" (default "30s" .Values.config.shutdown_timeout) | int }}
{{- $pre := int .Values.preStopSleepSeconds }}
{{- $flush := ternary 5 0 (.Values.otel.enabled | default false) }}
{{- if le $grace (add $pre $delay $drain $flush) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed preStopSleepSeconds + config.shutdown_delay + config.shutdown_timeout (%d + %d + %d)%s: pods would be killed while requests, payments among them, still drain" $grace $pre $delay $drain (ternary " + 5 to flush the traces" "" (.Values.otel.enabled | default false))) }}
{{- end }}
{{- $payments := default dict .Values.config.payments }}
{{- if and (get $payments "webhook_path") (not $k.paymentsWebhookSecrets) }}
{{- fail "secrets.keys.paymentsWebhookSecrets: config.payments.webhook_path needs the upstream's signing secrets (without them every webhook would be refused)" }}
{{- end }}
{{- if .Values.ingress.enabled }}
{{- $public := (urlParse (toString .Values.config.public_url)).host | lower | trimSuffix ":443" }}
{{- if ne $public (lower .Values.ingress.host) }}
{{- fail (printf "ingress.host (%s) is not the host of config.public_url (%s): the session cookie and the CSRF origin check follow public_url" .Values.ingress.host $public) }}
{{- end }}
{{- end }}
{{- if and .Values.otel.enabled .Values.networkPolicy.enabled (not .Values.otel.networkPolicyTo) }}
{{- fail "otel.networkPolicyTo is empty: the NetworkPolicy would drop every span sent to otel.endpoint; name where the collector runs (an ipBlock for a hosted one, with otel.ports)" }}
{{- end }}
{{- $owned := list "BFF_ENV" "BFF_LISTEN" "BFF_ADMIN_LISTEN" "BFF_UPSTREAM_CLIENT_SECRET_FILE" "BFF_ADMIN_TOKEN_FILE" "GOMEMLIMIT" "K8S_POD_NAME" "K8S_NAMESPACE_NAME" }}
{{- range (include "bff.secretEnv" . | fromYamlArray) }}{{ $owned = append $owned (index . 0) }}{{ end }}
{{- range .Values.extraEnv }}
{{- $name := toString .name }}
{{- if or (has $name $owned) (hasPrefix "BFF_SHUTDOWN_" $name) (hasPrefix "OTEL_" $name | and $.Values.otel.enabled) }}
{{- fail (printf "extraEnv %s: the chart sets it (or checks it) from its own values; set those instead" $name) }}
{{- end }}
{{- if and (hasKey . "value") (regexMatch "(?i)(SECRETS?|PASSWORD|PASSWD|KEYS?|TOKEN|HEADERS|DSN|CREDENTIALS|AUTH)$|(?i)^BFF_.*(REDIS|POSTGRES)_URL$" $name) }}
{{- fail (printf "extraEnv %s: a secret setting takes valueFrom.secretKeyRef, never a value" $name) }}
{{- end }}
{{- end }}
{{- $groups := (.Files.Get "files/alerts.yaml" | fromYaml).groups }}
{{- if and .Values.prometheusRule.enabled (not $groups) }}
{{- fail "files/alerts.yaml has no alert groups: it is a link to deploy/prometheus/alerts.yaml, which this checkout did not keep as a link" }}
{{- end }}
{{- end }}
