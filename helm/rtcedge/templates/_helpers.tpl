{{/* _helpers.tpl — names, labels, images and the checks every install must pass. */}}

{{- define "rtcedge.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rtcedge.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "relay"). */}}
{{- define "rtcedge.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "rtcedge.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{- define "rtcedge.hintKeysSecret" -}}
{{- default (printf "%s-hint-keys" (include "rtcedge.fullname" .)) .Values.hintKeys.existingSecret -}}
{{- end -}}

{{- define "rtcedge.apiKeysSecret" -}}
{{- default (printf "%s-api-keys" (include "rtcedge.fullname" .)) .Values.transceiver.apiKeys.existingSecret -}}
{{- end -}}

{{- define "rtcedge.hasApiKeys" -}}
{{- if or .Values.transceiver.apiKeys.existingSecret .Values.transceiver.apiKeys.keys }}true{{ end -}}
{{- end -}}

{{- define "rtcedge.realtimeKeysSecret" -}}
{{- default (printf "%s-realtime-keys" (include "rtcedge.fullname" .)) .Values.transceiver.realtimeKeys.existingSecret -}}
{{- end -}}

{{- define "rtcedge.hasRealtimeKeys" -}}
{{- if or .Values.transceiver.realtimeKeys.existingSecret .Values.transceiver.realtimeKeys.secrets }}true{{ end -}}
{{- end -}}

{{- define "rtcedge.twilioSecret" -}}
{{- default (printf "%s-twilio-auth-token" (include "rtcedge.fullname" .)) .Values.transceiver.telephony.twilio.existingSecret -}}
{{- end -}}

{{/* Whether the transceivers get a Twilio auth token file (the Secret mounted, the key set). */}}
{{- define "rtcedge.hasTwilio" -}}
{{- if or .Values.transceiver.telephony.twilio.existingSecret .Values.transceiver.telephony.twilio.authTokens }}true{{ end -}}
{{- end -}}

{{/* Where the Twilio Secret is mounted, and the file telephony.twilio.auth_token_file names.
     A directory, not a subPath: the kubelet keeps it current (the pods still read it at
     start only). */}}
{{- define "rtcedge.twilioDir" -}}/etc/rtcedge/twilio{{- end -}}
{{- define "rtcedge.twilioFile" -}}{{ include "rtcedge.twilioDir" . }}/auth-token{{- end -}}

{{/* Whether more than one transceiver pod can run: ek_ keys then need shared secrets. */}}
{{- define "rtcedge.transceiverFleet" -}}
{{- $t := .Values.transceiver -}}
{{- if and $t.enabled (or (and $t.hpa.enabled (gt ($t.hpa.maxReplicas | int) 1)) (and (not $t.hpa.enabled) (gt ($t.replicas | int) 1))) }}true{{ end -}}
{{- end -}}

{{/* Where the Redis Secrets are mounted: directories, not subPaths, so the kubelet keeps the
     files current, and the binaries read them at every connect (no restart on rotation). */}}
{{- define "rtcedge.redisAuthDir" -}}/etc/rtcedge/redis-auth{{- end -}}
{{- define "rtcedge.redisTlsDir" -}}/etc/rtcedge/redis-tls{{- end -}}

{{/* Whether the pods mount redis.auth.existingSecret / redis.tls.existingSecret. */}}
{{- define "rtcedge.hasRedisAuth" -}}
{{- if and .Values.redis.url .Values.redis.auth.existingSecret }}true{{ end -}}
{{- end -}}
{{- define "rtcedge.hasRedisTls" -}}
{{- if and .Values.redis.url .Values.redis.tls.existingSecret }}true{{ end -}}
{{- end -}}

{{/* The Redis URL relays and transceivers share, empty without one: redis.url with the user
     of redis.auth.username and the query parameters naming the mounted files (password_file,
     sentinel_password_file, tls_ca_file, tls_cert_file, tls_key_file) and tls_server_name. The in-chart Redis has
     neither password nor TLS. */}}
{{- define "rtcedge.redisUrl" -}}
{{- $r := .Values.redis -}}
{{- if $r.url -}}
{{- $url := $r.url -}}
{{- if $r.auth.username -}}
{{- $scheme := regexFind "^[a-z+]+://" $url -}}
{{- $url = printf "%s%s:@%s" $scheme $r.auth.username (trimPrefix $scheme $url) -}}
{{- end -}}
{{- $params := list -}}
{{- if $r.auth.existingSecret -}}
{{- $params = append $params (printf "password_file=%s/password" (include "rtcedge.redisAuthDir" .)) -}}
{{- if $r.auth.sentinelPasswordKey -}}
{{- $params = append $params (printf "sentinel_password_file=%s/sentinel-password" (include "rtcedge.redisAuthDir" .)) -}}
{{- end -}}
{{- end -}}
{{- if $r.tls.existingSecret -}}
{{- if $r.tls.caKey -}}
{{- $params = append $params (printf "tls_ca_file=%s/ca.crt" (include "rtcedge.redisTlsDir" .)) -}}
{{- end -}}
{{- if $r.tls.certKey -}}
{{- $params = append $params (printf "tls_cert_file=%s/tls.crt" (include "rtcedge.redisTlsDir" .)) -}}
{{- $params = append $params (printf "tls_key_file=%s/tls.key" (include "rtcedge.redisTlsDir" .)) -}}
{{- end -}}
{{- end -}}
{{- if $r.tls.serverName -}}
{{- $params = append $params (printf "tls_server_name=%s" $r.tls.serverName) -}}
{{- end -}}
{{- if $params -}}
{{- $url = printf "%s%s%s" $url (ternary "&" "?" (contains "?" $url)) (join "&" $params) -}}
{{- end -}}
{{- $url -}}
{{- else if $r.inChart.enabled -}}
{{- printf "redis://%s-redis:6379" (include "rtcedge.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* redis.auth and redis.tls against redis.url: what the schema cannot say. */}}
{{- define "rtcedge.validateRedis" -}}
{{- $r := .Values.redis -}}
{{- $url := $r.url -}}
{{- $scheme := regexReplaceAll "://.*$" $url "" -}}
{{- $query := ternary (regexReplaceAll "^[^?]*[?]" $url "") "" (contains "?" $url) -}}
{{- $userinfo := regexReplaceAll "@$" (regexFind "^[^/?]*@" (regexReplaceAll "^[a-z+]+://" $url "")) "" -}}
{{- $urlPassword := ternary (regexReplaceAll "^[^:]*:" $userinfo "") $userinfo (contains ":" $userinfo) -}}
{{- $tlsScheme := hasPrefix "rediss" $scheme -}}
{{- $set := or $r.auth.existingSecret $r.auth.sentinelPasswordKey $r.auth.username $r.tls.existingSecret $r.tls.serverName $r.tls.certKey $r.tls.keyKey -}}
{{- if and $set (not $url) -}}
{{- fail "redis.auth, redis.tls: they apply to redis.url (an existing Redis); the in-chart Redis (redis.inChart.enabled) has no password or TLS" -}}
{{- end -}}
{{- if and $r.auth.existingSecret $urlPassword -}}
{{- fail "redis.auth.existingSecret: redis.url has a password too; pick one (drop it from the URL: the Secret's file wins and is re-read at every connect)" -}}
{{- end -}}
{{- if and $r.auth.existingSecret (regexMatch "(^|&)password_file=" $query) -}}
{{- fail "redis.auth.existingSecret: redis.url names a password_file too; pick one" -}}
{{- end -}}
{{- if and $r.auth.sentinelPasswordKey (not (hasSuffix "+sentinel" $scheme)) -}}
{{- fail (printf "redis.auth.sentinelPasswordKey: redis.url's scheme %s:// has no sentinels; it is for redis+sentinel:// and rediss+sentinel://" $scheme) -}}
{{- end -}}
{{- if and $r.auth.sentinelPasswordKey (not $r.auth.existingSecret) -}}
{{- fail "redis.auth.sentinelPasswordKey: a key of redis.auth.existingSecret; set that Secret" -}}
{{- end -}}
{{- if and $r.auth.sentinelPasswordKey (regexMatch "(^|&)sentinel_password(_file)?=" $query) -}}
{{- fail "redis.auth.sentinelPasswordKey: redis.url names a sentinel_password or sentinel_password_file too; pick one" -}}
{{- end -}}
{{- if and $r.auth.username (not $r.auth.existingSecret) -}}
{{- fail "redis.auth.username: the ACL user's password comes from redis.auth.existingSecret; set it (or put user:password in redis.url)" -}}
{{- end -}}
{{- if and $r.auth.username $userinfo -}}
{{- fail "redis.auth.username: redis.url has a user part (…@host) too; pick one" -}}
{{- end -}}
{{- if and $r.tls.existingSecret (not $tlsScheme) -}}
{{- fail (printf "redis.tls.existingSecret: redis.url's scheme %s:// is plaintext; TLS needs rediss://, rediss+sentinel:// or rediss+cluster://" $scheme) -}}
{{- end -}}
{{- if and $r.tls.serverName (not $tlsScheme) -}}
{{- fail (printf "redis.tls.serverName: redis.url's scheme %s:// is plaintext; TLS needs rediss://, rediss+sentinel:// or rediss+cluster://" $scheme) -}}
{{- end -}}
{{- if and $r.tls.existingSecret (regexMatch "(^|&)tls_(ca_file|cert_file|key_file)=" $query) -}}
{{- fail "redis.tls.existingSecret: redis.url names tls_ca_file, tls_cert_file or tls_key_file too; pick one" -}}
{{- end -}}
{{- if and $r.tls.serverName (regexMatch "(^|&)tls_server_name=" $query) -}}
{{- fail "redis.tls.serverName: redis.url names tls_server_name too; pick one" -}}
{{- end -}}
{{- if ne (empty $r.tls.certKey) (empty $r.tls.keyKey) -}}
{{- fail "redis.tls.certKey, redis.tls.keyKey: a client certificate and its key go together (both set for mutual TLS, or both empty)" -}}
{{- end -}}
{{- if and (or $r.tls.certKey $r.tls.keyKey) (not $r.tls.existingSecret) -}}
{{- fail "redis.tls.certKey, redis.tls.keyKey: name keys of redis.tls.existingSecret; set it" -}}
{{- end -}}
{{- if and $r.tls.existingSecret (not (or $r.tls.caKey $r.tls.certKey)) -}}
{{- fail "redis.tls.existingSecret: neither redis.tls.caKey nor redis.tls.certKey names a key of it" -}}
{{- end -}}
{{- end -}}

{{- define "rtcedge.drainTimeout" -}}
{{- .Values.transceiver.sessions.drainTimeoutSeconds | int -}}
{{- end -}}

{{- define "rtcedge.gracePeriod" -}}
{{- $drain := include "rtcedge.drainTimeout" . | int -}}
{{- $grace := .Values.transceiver.terminationGracePeriodSeconds | int -}}
{{- if eq $grace 0 }}{{ add $drain 30 }}{{ else }}{{ $grace }}{{ end -}}
{{- end -}}

{{/* What values.schema.json cannot say: combinations. Included by every manifest. */}}
{{- define "rtcedge.validate" -}}
{{- if not (or .Values.hintKeys.existingSecret .Values.hintKeys.keys) -}}
{{- fail "hintKeys: set hintKeys.existingSecret (a Secret with hint-keys.yaml) or hintKeys.keys (generate one with `rtcedge-relay hint keygen --id 1`)" -}}
{{- end -}}
{{- if and .Values.transceiver.enabled (not .Values.vip.addresses) -}}
{{- fail "vip.addresses: the transceivers need the VIP clients reach (\"ip:port\", e.g. the LoadBalancer's address)" -}}
{{- end -}}
{{- if and .Values.redis.url .Values.redis.inChart.enabled -}}
{{- fail "redis: set either redis.url (an existing Redis) or redis.inChart.enabled, not both" -}}
{{- end -}}
{{- include "rtcedge.validateRedis" . -}}
{{- if not (or (include "rtcedge.redisUrl" .) .Values.relay.endpoints) -}}
{{- fail "redis: the relays learn transceiver endpoints from Redis: set redis.url (or redis.inChart.enabled for a trial), or list relay.endpoints" -}}
{{- end -}}
{{- if and (not (include "rtcedge.redisUrl" .)) .Values.transceiver.enabled (gt (.Values.transceiver.replicas | int) 1) -}}
{{- fail "transceiver.replicas: without a registry (redis) every transceiver pod would mint the same endpoint ids; use redis or one replica" -}}
{{- end -}}
{{- if le (include "rtcedge.gracePeriod" . | int) (include "rtcedge.drainTimeout" . | int) -}}
{{- fail "transceiver.terminationGracePeriodSeconds must exceed transceiver.sessions.drainTimeoutSeconds, or the kubelet kills calls still draining" -}}
{{- end -}}
{{- if and (not (include "rtcedge.hasApiKeys" .)) (not .Values.transceiver.http.allowPublicWithoutKeys) -}}
{{- fail "transceiver.apiKeys: signaling listens on the pod network; set apiKeys.keys or apiKeys.existingSecret (or transceiver.http.allowPublicWithoutKeys behind an authenticating gateway)" -}}
{{- end -}}
{{- if and (include "rtcedge.transceiverFleet" .) (not (include "rtcedge.hasRealtimeKeys" .)) .Values.transceiver.realtimeKeys.required -}}
{{- fail "transceiver.realtimeKeys: more than one transceiver pod, and ephemeral ek_ keys verify only on a pod that holds the secret that signed them; set realtimeKeys.secrets (\"id:secret\", e.g. \"k1:$(openssl rand -hex 32)\") or realtimeKeys.existingSecret, or realtimeKeys.required: false when no client uses /v1/realtime/client_secrets" -}}
{{- end -}}
{{- $port := printf ":%d" (.Values.vip.service.port | int) -}}
{{- $listened := false -}}
{{- range .Values.relay.listen }}{{ if hasSuffix $port . }}{{ $listened = true }}{{ end }}{{ end -}}
{{- if not $listened -}}
{{- fail (printf "vip.service.port: %d is not a port of relay.listen; the VIP Service would send to a port no relay binds" (.Values.vip.service.port | int)) -}}
{{- end -}}
{{- if eq .Values.relay.mode "xdp" -}}
{{- $exact := false -}}
{{- range .Values.relay.listen -}}
{{- if not (or (hasPrefix "0.0.0.0:" .) (hasPrefix "[::]:" .)) }}{{ $exact = true }}{{ end -}}
{{- end -}}
{{- if not $exact -}}
{{- fail "relay.listen: mode xdp steers only exact VIP addresses; list the VIP as it arrives on the node (e.g. 203.0.113.10:3478)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The relay's capabilities, one per line; README.md "Capabilities" says why each. */}}
{{- define "rtcedge.relayCapabilities" -}}
- NET_ADMIN
{{- if ne .Values.relay.mode "userspace" }}
- BPF
- PERFMON
{{- if .Values.relay.capabilities.sysAdmin }}
- SYS_ADMIN
{{- end }}
{{- if .Values.relay.capabilities.sysResource }}
- SYS_RESOURCE
{{- end }}
{{- end }}
{{- end -}}
