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

{{/* The Redis URL relays and transceivers share, empty without one. */}}
{{- define "rtcedge.redisUrl" -}}
{{- if .Values.redis.url -}}
{{- .Values.redis.url -}}
{{- else if .Values.redis.inChart.enabled -}}
{{- printf "redis://%s-redis:6379" (include "rtcedge.fullname" .) -}}
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
