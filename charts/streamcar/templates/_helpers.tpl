{{/* Names and labels: the chart's name (nameOverride), and every object's full name
(fullnameOverride; else <release>-<name>, or <release> when it already contains the name). */}}
{{- define "streamcar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamcar.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "streamcar.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The labels the metrics Service and the PodDisruptionBudget select; a parent chart's pods
carry them too (include mode). */}}
{{- define "streamcar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamcar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "streamcar.labels" -}}
{{ include "streamcar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* An image reference: repository@digest when a digest is set (the tag is then ignored), else
repository:tag (tag empty: latest). */}}
{{- define "streamcar.imageRef" -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository (.tag | default "latest") -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount the pod runs as: the chart's (serviceAccount.create), else the named one,
else the namespace's default. */}}
{{- define "streamcar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "streamcar.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The app container's lifecycle (classic sidecar mode): a preStop sleep of drain_timeout, so the app
keeps serving while streamcar drains its last requests (both get SIGTERM at once otherwise). ""
with nativeSidecar (Kubernetes stops the app first, streamcar after) or app.preStopSleepSeconds 0.
The sleep action needs Kubernetes >= 1.30; older clusters get `exec: sleep N`. Include mode:
  lifecycle: {{ include "streamcar.appLifecycle" .Subcharts.streamcar | nindent 10 }}
*/}}
{{- define "streamcar.preStopSleepSeconds" -}}
{{- if kindIs "invalid" .Values.app.preStopSleepSeconds -}}
{{- include "streamcar.drainSeconds" . -}}
{{- else -}}
{{- .Values.app.preStopSleepSeconds -}}
{{- end -}}
{{- end -}}
{{- define "streamcar.appLifecycle" -}}
{{- $seconds := include "streamcar.preStopSleepSeconds" . | int -}}
{{- if and (not .Values.nativeSidecar) (gt $seconds 0) -}}
preStop:
{{- if semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version }}
  sleep:
    seconds: {{ $seconds }}
{{- else }}
  exec:
    command: ["sleep", "{{ $seconds }}"]
{{- end }}
{{- end -}}
{{- end -}}

{{/* The rendered configuration file: config, with api and archive rendered from their values. */}}
{{- define "streamcar.configYaml" -}}
{{- if not (or .Values.config.subscriptions .Values.config.streams) -}}
{{- fail "config.subscriptions: at least one subscription is required (or config.streams, for a sidecar that only serves the log API)" -}}
{{- end -}}
{{- if and (include "streamcar.sentinelUsernameKey" .) (not (include "streamcar.sentinelPasswordKey" .)) -}}
{{- fail "redisAuth: the sentinels' user needs its password (the sentinels' AUTH takes both): set redisAuth.sentinelPasswordKey, or sentinelPassword for the chart's Secret" -}}
{{- end -}}
{{- $config := deepCopy .Values.config -}}
{{- if .Values.api.enabled -}}
{{- $api := dict "listen" .Values.api.listen "max_body" .Values.api.max_body "idempotency_ttl" .Values.api.idempotency_ttl "max_future_skew" .Values.api.max_future_skew "allowed_origins" .Values.api.allowed_origins "max_follow_buffer" .Values.api.max_follow_buffer -}}
{{- if include "streamcar.apiTokenSecret" . -}}
{{- $_ := set $api "token_file" (printf "%s/%s" (include "streamcar.apiTokenDir" .) .Values.api.token.key) -}}
{{- end -}}
{{- $_ := set $config "api" $api -}}
{{- end -}}
{{- if .Values.archive.enabled -}}
{{- include "streamcar.archiveChecks" . -}}
{{- $url := "${STREAMCAR_ARCHIVE_URL}" -}}
{{- if eq .Values.archive.backend "sqlite" -}}
{{- $url = printf "sqlite://%s/archive.db" (include "streamcar.archiveDir" .) -}}
{{- end -}}
{{- $_ := set $config "archive" (dict "url" $url "interval" .Values.archive.interval "batch" .Values.archive.batch) -}}
{{- end -}}
{{ toYaml $config }}
{{- end -}}

{{/* Where the API token Secret is mounted, and the Secret's name ("" when there is no token). */}}
{{- define "streamcar.apiTokenDir" -}}/var/run/streamcar/api{{- end -}}
{{- define "streamcar.apiTokenSecret" -}}
{{- if .Values.api.token.existingSecret -}}
{{- .Values.api.token.existingSecret -}}
{{- else if .Values.api.token.value -}}
{{- printf "%s-api" (include "streamcar.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Where the SQLite archive's volume is mounted, and the claim it uses. */}}
{{- define "streamcar.archiveDir" -}}/var/lib/streamcar{{- end -}}
{{- define "streamcar.archiveClaim" -}}
{{- default (printf "%s-archive" (include "streamcar.fullname" .)) .Values.archive.sqlite.existingClaim -}}
{{- end -}}
{{- define "streamcar.sqliteArchive" -}}
{{- if and .Values.archive.enabled (eq .Values.archive.backend "sqlite") -}}true{{- end -}}
{{- end -}}

{{/*
The archive's rules: SQLite is a file on one volume, written by one process; several replicas
would each fold into their own file (or fight over one ReadWriteOnce claim), so the chart refuses
it where it can see the replicas (app mode). PostgreSQL needs the Secret with its URL.
*/}}
{{- define "streamcar.archiveChecks" -}}
{{- if eq .Values.archive.backend "sqlite" -}}
{{- if and .Values.app.enabled (or (gt (int .Values.app.replicas) 1) (and .Values.keda.enabled (gt (int .Values.keda.maxReplicaCount) 1))) -}}
{{- fail (printf "archive.backend sqlite keeps the archive in one file for ONE replica, but app.replicas is %v%s: use archive.backend postgres (a database every replica shares) or one replica" .Values.app.replicas (ternary (printf " and KEDA may scale to %v" .Values.keda.maxReplicaCount) "" .Values.keda.enabled)) -}}
{{- end -}}
{{- else if eq .Values.archive.backend "postgres" -}}
{{- if not .Values.archive.postgres.existingSecret -}}
{{- fail "archive.postgres.existingSecret: the Secret holding the PostgreSQL URL (postgres://user:password@host:5432/db) is required with archive.backend postgres" -}}
{{- end -}}
{{- else -}}
{{- fail (printf "archive.backend: %q is not sqlite or postgres" .Values.archive.backend) -}}
{{- end -}}
{{- end -}}

{{/* The Secret with the Redis credentials, or "" when there is none. */}}
{{- define "streamcar.secretName" -}}
{{- if .Values.redisAuth.existingSecret -}}
{{- .Values.redisAuth.existingSecret -}}
{{- else if or .Values.redisAuth.password .Values.redisAuth.sentinelPassword -}}
{{- printf "%s-redis" (include "streamcar.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
The Secret's keys holding the sentinels' ACL user and password, or "" when there is none: the
key named in the values, else (the chart's own Secret) a default key when the value is set.
*/}}
{{- define "streamcar.sentinelUsernameKey" -}}
{{- $auth := .Values.redisAuth -}}
{{- if $auth.sentinelUsernameKey -}}
{{- $auth.sentinelUsernameKey -}}
{{- else if and (not $auth.existingSecret) $auth.sentinelUsername -}}
sentinel-username
{{- end -}}
{{- end -}}
{{- define "streamcar.sentinelPasswordKey" -}}
{{- $auth := .Values.redisAuth -}}
{{- if $auth.sentinelPasswordKey -}}
{{- $auth.sentinelPasswordKey -}}
{{- else if and (not $auth.existingSecret) $auth.sentinelPassword -}}
sentinel-password
{{- end -}}
{{- end -}}

{{/* config.redis.mode, "auto" when unset. */}}
{{- define "streamcar.redisMode" -}}
{{- (.Values.config.redis).mode | default "auto" -}}
{{- end -}}

{{/* host:port of config.redis.url (the port 6379 when the url names none). */}}
{{- define "streamcar.urlAddress" -}}
{{- $hostPort := regexReplaceAll "^rediss?://([^/]*@)?([^@/]+).*$" .Values.config.redis.url "${2}" -}}
{{- if regexMatch ":[0-9]+$" $hostPort -}}
{{- $hostPort -}}
{{- else -}}
{{- printf "%s:6379" $hostPort -}}
{{- end -}}
{{- end -}}

{{/* The database index of config.redis.url (redis://host:port/N), "0" when it names none. */}}
{{- define "streamcar.urlDatabase" -}}
{{- $url := .Values.config.redis.url -}}
{{- if regexMatch "^rediss?://[^/]*/[0-9]+$" $url -}}
{{- regexReplaceAll "^.*/([0-9]+)$" $url "${1}" -}}
{{- else if regexMatch "^unix://[^?]*\\?db=[0-9]+$" $url -}}
{{- regexReplaceAll "^.*=([0-9]+)$" $url "${1}" -}}
{{- else -}}
0
{{- end -}}
{{- end -}}

{{/* shutdown.drain_timeout in whole seconds (rounded up); durations like 25s, 1m30s, 500ms. */}}
{{- define "streamcar.drainSeconds" -}}
{{- $ms := 0 -}}
{{- range regexFindAll "[0-9]+(ms|h|m|s)" (toString .Values.config.shutdown.drain_timeout) -1 -}}
{{- $n := regexFind "^[0-9]+" . | int -}}
{{- if hasSuffix "ms" . }}{{ $ms = add $ms $n }}
{{- else if hasSuffix "h" . }}{{ $ms = add $ms (mul $n 3600000) }}
{{- else if hasSuffix "m" . }}{{ $ms = add $ms (mul $n 60000) }}
{{- else }}{{ $ms = add $ms (mul $n 1000) }}{{ end -}}
{{- end -}}
{{- div (add $ms 999) 1000 -}}
{{- end -}}

{{/*
The bytes a size of the configuration stands for ("32MiB", "512KiB", "1GiB", "100B"); streamcar
itself rejects any other spelling, so the chart does too.
*/}}
{{- define "streamcar.sizeBytes" -}}
{{- $text := toString . -}}
{{- if not (regexMatch "^[0-9]+(B|KiB|MiB|GiB)$" $text) -}}
{{- fail (printf "handler.max_held_bytes: %q is not a size like 32MiB (units B, KiB, MiB, GiB)" $text) -}}
{{- end -}}
{{- $n := regexFind "^[0-9]+" $text | int64 -}}
{{- if hasSuffix "GiB" $text }}{{ mul $n 1073741824 }}
{{- else if hasSuffix "MiB" $text }}{{ mul $n 1048576 }}
{{- else if hasSuffix "KiB" $text }}{{ mul $n 1024 }}
{{- else }}{{ $n }}{{ end -}}
{{- end -}}

{{/*
The memory limit streamcar needs, in MiB: 64 MiB for the process, plus 3 x the sum of every
subscription's handler.max_held_bytes (default 32MiB; a subscription's own value, else the one in
config.defaults): the held payload, a copy of each request body in flight, and a read's reply
buffers (docs/configuration.md). One subscription at the default: 64 + 3 x 32 = 160Mi.
*/}}
{{- define "streamcar.memoryLimitMiB" -}}
{{- $default := "32MiB" -}}
{{- with .Values.config.defaults -}}{{- with .handler -}}{{- with .max_held_bytes -}}
{{- $default = . -}}
{{- end -}}{{- end -}}{{- end -}}
{{- $total := 0 -}}
{{- range .Values.config.subscriptions -}}
{{- $size := $default -}}
{{- with .handler -}}{{- with .max_held_bytes -}}{{- $size = . -}}{{- end -}}{{- end -}}
{{- $total = add $total (include "streamcar.sizeBytes" $size | int64) -}}
{{- end -}}
{{- add 64 (mul 3 (div (add $total 1048575) 1048576)) -}}
{{- end -}}

{{/* The container's resources: the values given, with limits.memory sized from the byte budget
when it is not set (resources.limits.memory: "" or absent). */}}
{{- define "streamcar.resources" -}}
{{- $resources := deepCopy (default dict .Values.resources) -}}
{{- $limits := default dict $resources.limits -}}
{{- if not $limits.memory -}}
{{- $_ := set $limits "memory" (printf "%sMi" (include "streamcar.memoryLimitMiB" .)) -}}
{{- end -}}
{{- $_ := set $resources "limits" $limits -}}
{{- toYaml $resources -}}
{{- end -}}

{{- define "streamcar.terminationGracePeriodSeconds" -}}
{{- $drain := include "streamcar.drainSeconds" . | int -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds -}}
{{- add $drain 10 -}}
{{- else -}}
{{- if le (int .Values.terminationGracePeriodSeconds) $drain -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be above shutdown.drain_timeout (%ds): Kubernetes would kill streamcar mid-drain" .Values.terminationGracePeriodSeconds $drain) -}}
{{- end -}}
{{- .Values.terminationGracePeriodSeconds -}}
{{- end -}}
{{- end -}}

{{/*
The streamcar container. Other charts add it to their pod spec with
  containers: [ {{ include "streamcar.container" .Subcharts.streamcar | nindent 4 }} ]
or, with nativeSidecar, under initContainers (it then carries restartPolicy: Always), together
with the volume from "streamcar.volume".
*/}}
{{- define "streamcar.container" -}}
- name: streamcar
  image: {{ include "streamcar.imageRef" .Values.image | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- if .Values.nativeSidecar }}
  restartPolicy: Always
  {{- end }}
  args: ["run", "-c", "/etc/streamcar/streamcar.yaml"]
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    # The consumer-name lease's instance (SPEC 4.7): a restarted container of this pod takes the
    # lease its predecessor held at once instead of waiting for it to expire.
    - name: POD_UID
      valueFrom:
        fieldRef:
          fieldPath: metadata.uid
    {{- $secret := include "streamcar.secretName" . }}
    {{- if $secret }}
    - name: REDIS_USERNAME
      valueFrom:
        secretKeyRef:
          name: {{ $secret }}
          key: {{ .Values.redisAuth.usernameKey }}
          optional: true
    - name: REDIS_PASSWORD
      valueFrom:
        secretKeyRef:
          name: {{ $secret }}
          key: {{ .Values.redisAuth.passwordKey }}
    {{- with include "streamcar.sentinelUsernameKey" . }}
    - name: REDIS_SENTINEL_USERNAME
      valueFrom:
        secretKeyRef:
          name: {{ $secret }}
          key: {{ . }}
          optional: true
    {{- end }}
    {{- with include "streamcar.sentinelPasswordKey" . }}
    - name: REDIS_SENTINEL_PASSWORD
      valueFrom:
        secretKeyRef:
          name: {{ $secret }}
          key: {{ . }}
    {{- end }}
    {{- end }}
    {{- if and .Values.archive.enabled (eq .Values.archive.backend "postgres") }}
    - name: STREAMCAR_ARCHIVE_URL
      valueFrom:
        secretKeyRef:
          name: {{ .Values.archive.postgres.existingSecret }}
          key: {{ .Values.archive.postgres.key }}
    {{- end }}
    {{- with .Values.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: sc-admin
      containerPort: {{ .Values.adminPort }}
      protocol: TCP
  {{- $readiness := .Values.probes.readiness }}
  livenessProbe:
    httpGet: { path: /healthz, port: sc-admin }
    {{- toYaml .Values.probes.liveness | nindent 4 }}
  {{- if $readiness.enabled }}
  readinessProbe:
    httpGet: { path: {{ $readiness.path }}, port: sc-admin }
    {{- with omit $readiness "enabled" "path" }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  {{- /* The startup probe follows readiness: on /readyz a pod that cannot reach Redis within
    its window restarts; with /healthz (or no readiness) it does not wait for Redis. */}}
  startupProbe:
    httpGet: { path: {{ ternary $readiness.path "/healthz" (and $readiness.enabled true) }}, port: sc-admin }
    {{- toYaml .Values.probes.startup | nindent 4 }}
  resources:
    {{- include "streamcar.resources" . | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: streamcar-config
      mountPath: /etc/streamcar
      readOnly: true
    {{- if and .Values.api.enabled (include "streamcar.apiTokenSecret" .) }}
    - name: streamcar-api-token
      mountPath: {{ include "streamcar.apiTokenDir" . }}
      readOnly: true
    {{- end }}
    {{- if include "streamcar.sqliteArchive" . }}
    - name: streamcar-archive
      mountPath: {{ include "streamcar.archiveDir" . }}
    {{- end }}
    {{- with .Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* The volumes the container mounts (and extraVolumes). */}}
{{- define "streamcar.volume" -}}
- name: streamcar-config
  configMap:
    name: {{ include "streamcar.fullname" . }}
{{- if and .Values.api.enabled (include "streamcar.apiTokenSecret" .) }}
- name: streamcar-api-token
  secret:
    secretName: {{ include "streamcar.apiTokenSecret" . }}
    items:
      - key: {{ .Values.api.token.key }}
        path: {{ .Values.api.token.key }}
{{- end }}
{{- if include "streamcar.sqliteArchive" . }}
- name: streamcar-archive
  persistentVolumeClaim:
    claimName: {{ include "streamcar.archiveClaim" . }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The pod's security context: with the SQLite archive, fsGroup makes the claim writable for
streamcar's user (65532) unless the values set one. */}}
{{- define "streamcar.podSecurityContext" -}}
{{- $context := deepCopy (default dict .Values.podSecurityContext) -}}
{{- if and (include "streamcar.sqliteArchive" .) (not (hasKey $context "fsGroup")) -}}
{{- $_ := set $context "fsGroup" 65532 -}}
{{- end -}}
{{- toYaml $context -}}
{{- end -}}

{{/* A pod annotation that changes with the configuration, so pods roll when policies change. */}}
{{- define "streamcar.checksumAnnotation" -}}
checksum/streamcar-config: {{ include "streamcar.configYaml" . | sha256sum }}
{{- end -}}


{{/* topologySpreadConstraints, each without a labelSelector given the chart's selector labels
(a constraint selecting nothing spreads nothing). */}}
{{- define "streamcar.topologySpreadConstraints" -}}
{{- $constraints := list -}}
{{- range .Values.topologySpreadConstraints -}}
{{- $constraint := deepCopy . -}}
{{- if not $constraint.labelSelector -}}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "streamcar.selectorLabels" $ | fromYaml)) -}}
{{- end -}}
{{- $constraints = append $constraints $constraint -}}
{{- end -}}
{{- toYaml $constraints -}}
{{- end -}}
