{{/* Names and labels. */}}
{{- define "streamcar.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "streamcar.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "streamcar.labels" -}}
{{ include "streamcar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The rendered configuration file. */}}
{{- define "streamcar.configYaml" -}}
{{- if not .Values.config.subscriptions -}}
{{- fail "config.subscriptions: at least one subscription is required" -}}
{{- end -}}
{{ toYaml .Values.config }}
{{- end -}}

{{/* The Secret with the Redis credentials, or "" when there is none. */}}
{{- define "streamcar.secretName" -}}
{{- if .Values.redisAuth.existingSecret -}}
{{- .Values.redisAuth.existingSecret -}}
{{- else if .Values.redisAuth.password -}}
{{- printf "%s-redis" (include "streamcar.fullname" .) -}}
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
  image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
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
    {{- end }}
    {{- with .Values.env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: sc-admin
      containerPort: {{ .Values.adminPort }}
      protocol: TCP
  livenessProbe:
    httpGet: { path: /healthz, port: sc-admin }
    {{- toYaml .Values.probes.liveness | nindent 4 }}
  readinessProbe:
    httpGet: { path: /readyz, port: sc-admin }
    {{- toYaml .Values.probes.readiness | nindent 4 }}
  startupProbe:
    httpGet: { path: /readyz, port: sc-admin }
    {{- toYaml .Values.probes.startup | nindent 4 }}
  resources:
    {{- include "streamcar.resources" . | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: streamcar-config
      mountPath: /etc/streamcar
      readOnly: true
{{- end -}}

{{/* The volume the container mounts. */}}
{{- define "streamcar.volume" -}}
- name: streamcar-config
  configMap:
    name: {{ include "streamcar.fullname" . }}
{{- end -}}

{{/* A pod annotation that changes with the configuration, so pods roll when policies change. */}}
{{- define "streamcar.checksumAnnotation" -}}
checksum/streamcar-config: {{ include "streamcar.configYaml" . | sha256sum }}
{{- end -}}
