{{/*
KEDA's side of the chart: what the ScaledObject scales, which stream/group pairs its triggers
watch, and how KEDA reaches Redis (KEDA's scaler: pkg/scalers/redis_streams_scaler.go and
redis_scaler.go's redisConnectionInfo; the README's "KEDA" section says which KEDA versions read
what the chart renders).
*/}}

{{/* The workload KEDA scales: keda.scaleTargetRef.name (templated, so a parent chart can say
"{{ .Release.Name }}-orders"), else the chart's own Deployment. In include mode the chart makes no
workload, so the name is required. */}}
{{- define "streamcar.kedaScaleTargetName" -}}
{{- $name := tpl (.Values.keda.scaleTargetRef.name | default "") . -}}
{{- if $name -}}
{{- $name -}}
{{- else if .Values.app.enabled -}}
{{- include "streamcar.fullname" . -}}
{{- end -}}
{{- end -}}

{{- define "streamcar.kedaScaleTargetRef" -}}
{{- $name := include "streamcar.kedaScaleTargetName" . -}}
{{- if not $name -}}
{{- fail "keda.scaleTargetRef.name: with app.enabled false (include mode) the chart makes no Deployment for KEDA to scale: name your own workload, e.g. keda.scaleTargetRef.name: \"{{ .Release.Name }}-orders\" (and kind: StatefulSet for one)" -}}
{{- end -}}
apiVersion: {{ .Values.keda.scaleTargetRef.apiVersion | default "apps/v1" }}
kind: {{ .Values.keda.scaleTargetRef.kind | default "Deployment" }}
name: {{ $name }}
{{- end -}}

{{/* The workload as kubectl names it ("deployment/rel-orders"), "" when the chart cannot know it
(include mode without keda.scaleTargetRef.name). */}}
{{- define "streamcar.workload" -}}
{{- with include "streamcar.kedaScaleTargetName" . -}}
{{- printf "%s/%s" (lower ($.Values.keda.scaleTargetRef.kind | default "Deployment")) . -}}
{{- end -}}
{{- end -}}

{{/* The entries a subscription's pod holds at most, concurrency x batch_size x 4
(docs/configuration.md, handler.max_held_bytes): the default pending-entries target, so KEDA
keeps a pod that is full of retries. Takes (list $subscription $.Values.config). */}}
{{- define "streamcar.kedaRoom" -}}
{{- $subscription := index . 0 | default dict -}}
{{- $defaults := (index . 1).defaults | default dict -}}
{{- $own := $subscription.handler | default dict -}}
{{- $common := $defaults.handler | default dict -}}
{{- $concurrency := $own.concurrency | default $common.concurrency | default 16 | int -}}
{{- $batch := $own.batch_size | default $common.batch_size | default 1 | int -}}
{{- mul $concurrency $batch 4 -}}
{{- end -}}

{{/*
The stream/group pairs KEDA watches, as a YAML list of {stream, group, room}: keda.stream (with
keda.consumerGroup, else the first subscription's group) alone when set, else every subscription.
A sharded subscription's entries live in its shard streams (SPEC 9): the logical stream holds
nothing, so its lag would always read 0 and is refused.
*/}}
{{- define "streamcar.kedaTargets" -}}
{{- $subscriptions := .Values.config.subscriptions | default list -}}
{{- $targets := list -}}
{{- if .Values.keda.stream -}}
{{- $first := first (default (list dict) $subscriptions) -}}
{{- $group := .Values.keda.consumerGroup | default $first.group -}}
{{- if not $group -}}
{{- fail "keda: set keda.consumerGroup with keda.stream (there is no subscription to take the group from)" -}}
{{- end -}}
{{- $targets = append $targets (dict "stream" .Values.keda.stream "group" $group "room" (include "streamcar.kedaRoom" (list $first .Values.config))) -}}
{{- else -}}
{{- if .Values.keda.consumerGroup -}}
{{- fail "keda.consumerGroup names the group of keda.stream: set keda.stream too (without both, every subscription's own stream and group is watched)" -}}
{{- end -}}
{{- if not $subscriptions -}}
{{- fail "keda: set keda.stream and keda.consumerGroup (there is no subscription to take them from)" -}}
{{- end -}}
{{- range $subscriptions -}}
{{- $shards := dig "sharding" "shards" 0 . -}}
{{- if $shards -}}
{{- fail (printf "keda: the subscription %s/%s is sharded: its entries are in %v shard streams (%s:{0}..%s:{%v} by default), not in %s, which KEDA's trigger would watch. Set keda.stream to one shard's stream to scale on its lag (it then replaces every subscription's triggers), with keda.maxReplicaCount at most the shard count (more members than shards only wait as standbys), or leave KEDA off" .stream .group $shards .stream .stream (sub (int $shards) 1) .stream) -}}
{{- end -}}
{{- $targets = append $targets (dict "stream" .stream "group" .group "room" (include "streamcar.kedaRoom" (list . $.Values.config))) -}}
{{- end -}}
{{- end -}}
{{ toYaml $targets }}
{{- end -}}

{{/* Whether KEDA talks TLS to Redis: keda.enableTLS, else a rediss:// url (standalone, cluster
and sentinel alike). "true" or "". */}}
{{- define "streamcar.kedaTLS" -}}
{{- $enable := .Values.keda.enableTLS -}}
{{- if kindIs "invalid" $enable -}}
{{- $enable = hasPrefix "rediss://" .Values.config.redis.url -}}
{{- end -}}
{{- if $enable }}true{{ end -}}
{{- end -}}

{{/* Whether KEDA skips verifying Redis's certificate: keda.tls.unsafeSsl, else what
config.redis.tls.verify says for streamcar. "true" or "". */}}
{{- define "streamcar.kedaUnsafeSsl" -}}
{{- $unsafe := .Values.keda.tls.unsafeSsl -}}
{{- if kindIs "invalid" $unsafe -}}
{{- $unsafe = eq (toString (dig "tls" "verify" true (.Values.config.redis | default dict))) "false" -}}
{{- end -}}
{{- if $unsafe }}true{{ end -}}
{{- end -}}

{{/*
The metadata every trigger shares: where Redis is (by trigger type), the database, TLS. Takes the
trigger type in .type and the root context in .root; a YAML map.
*/}}
{{- define "streamcar.kedaConnection" -}}
{{- $ := .root -}}
{{- $type := .type -}}
{{- $redis := $.Values.config.redis -}}
{{- $keda := $.Values.keda -}}
{{- $connection := dict -}}
{{- if and (hasPrefix "unix://" $redis.url) (not $keda.address) -}}
{{- fail "keda: KEDA cannot reach Redis through the pod's unix socket (config.redis.url): set keda.address to a host:port it can reach" -}}
{{- end -}}
{{- if eq $type "redis-cluster-streams" -}}
{{- /* Seeds: the url's node and config.redis.nodes; a cluster has one database. */ -}}
{{- $_ := set $connection "addresses" ($keda.address | default (join "," (prepend (default (list) $redis.nodes) (include "streamcar.urlAddress" $)))) -}}
{{- else if eq $type "redis-sentinel-streams" -}}
{{- /* The sentinels name the master; the url's host and port are not used. */ -}}
{{- $sentinels := $keda.address | default (join "," (default (list) ($redis.sentinel).addresses)) -}}
{{- if not $sentinels -}}
{{- fail "keda: the redis-sentinel-streams trigger needs the sentinels' addresses (config.redis.sentinel.addresses or keda.address)" -}}
{{- end -}}
{{- if not ($redis.sentinel).master -}}
{{- fail "keda: the redis-sentinel-streams trigger needs config.redis.sentinel.master" -}}
{{- end -}}
{{- $_ := set $connection "addresses" $sentinels -}}
{{- $_ := set $connection "sentinelMaster" $redis.sentinel.master -}}
{{- $_ := set $connection "databaseIndex" (include "streamcar.urlDatabase" $) -}}
{{- else -}}
{{- $_ := set $connection "address" ($keda.address | default (include "streamcar.urlAddress" $)) -}}
{{- $_ := set $connection "databaseIndex" (include "streamcar.urlDatabase" $) -}}
{{- end -}}
{{- $tls := include "streamcar.kedaTLS" $ -}}
{{- $unsafe := include "streamcar.kedaUnsafeSsl" $ -}}
{{- if not $tls -}}
{{- if or $keda.tls.caSecret $keda.tls.certSecret (eq (toString $keda.tls.unsafeSsl) "true") -}}
{{- fail "keda.tls: a CA, a client certificate or unsafeSsl is set, but KEDA's connection to Redis is not TLS (config.redis.url is not rediss:// and keda.enableTLS is not true): KEDA would ignore them" -}}
{{- end -}}
{{- end -}}
{{- $_ := set $connection "enableTLS" (ternary "true" "false" (eq $tls "true")) -}}
{{- if and $tls $unsafe -}}
{{- $_ := set $connection "unsafeSsl" "true" -}}
{{- end -}}
{{ toYaml $connection }}
{{- end -}}

{{/* The TriggerAuthentication's secretTargetRef entries (a YAML list, [] when there is none):
the Redis user and password, the sentinels' pair, and the TLS material (ca, cert, key). */}}
{{- define "streamcar.kedaAuthRefs" -}}
{{- $refs := list -}}
{{- $secret := include "streamcar.secretName" . -}}
{{- if $secret -}}
{{- $refs = append $refs (dict "parameter" "username" "name" $secret "key" .Values.redisAuth.usernameKey) -}}
{{- $refs = append $refs (dict "parameter" "password" "name" $secret "key" .Values.redisAuth.passwordKey) -}}
{{- with include "streamcar.sentinelUsernameKey" . -}}
{{- $refs = append $refs (dict "parameter" "sentinelUsername" "name" $secret "key" .) -}}
{{- end -}}
{{- with include "streamcar.sentinelPasswordKey" . -}}
{{- $refs = append $refs (dict "parameter" "sentinelPassword" "name" $secret "key" .) -}}
{{- end -}}
{{- end -}}
{{- $tls := .Values.keda.tls -}}
{{- if $tls.caSecret -}}
{{- $refs = append $refs (dict "parameter" "ca" "name" $tls.caSecret "key" $tls.caKey) -}}
{{- end -}}
{{- if $tls.certSecret -}}
{{- $refs = append $refs (dict "parameter" "cert" "name" $tls.certSecret "key" $tls.certKey) -}}
{{- $refs = append $refs (dict "parameter" "key" "name" $tls.certSecret "key" $tls.keyKey) -}}
{{- end -}}
{{ toYaml $refs }}
{{- end -}}
