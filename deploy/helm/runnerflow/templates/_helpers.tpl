{{/*
Names. Objects are named "<fullname>-<part>"; with a release called "runnerflow" they carry the
kustomize base's names (runnerflow-worker, runnerflow-webhook, ...). Each name is cut to 63
characters, the longest a label value or a Service name may be.
*/}}
{{- define "runnerflow.fullname" -}}
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

{{- define "runnerflow.name" -}}
{{- printf "%s-%s" (include "runnerflow.fullname" .ctx) .part | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels. app.kubernetes.io/name says what a pod is (runnerflow-worker, runnerflow-starter) and
app.kubernetes.io/instance which release it belongs to; selectors use both, so two releases
in one namespace never select each other's pods. part-of=runnerflow marks every object, and
the pods the metrics Service selects. Called with (dict "ctx" $ "name" "runnerflow-worker"
"component" "worker"); name and component may be empty.
*/}}
{{- define "runnerflow.labels" -}}
{{- $labels := dict "app.kubernetes.io/part-of" "runnerflow" -}}
{{- with .name }}{{ $_ := set $labels "app.kubernetes.io/name" . }}{{ end -}}
{{- with .component }}{{ $_ := set $labels "app.kubernetes.io/component" . }}{{ end -}}
{{- toYaml $labels }}
{{ include "runnerflow.releaseLabels" .ctx }}
{{- end -}}

{{- define "runnerflow.releaseLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "runnerflow.selectorLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end -}}

{{- define "runnerflow.image" -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end -}}

{{/*
The Temporal connection as the binaries' flags (worker, starter serve, starter apply). Secrets
are mounted as files by runnerflow.temporalVolumeMounts, never passed as flag values.
*/}}
{{- define "runnerflow.temporalArgs" -}}
{{- $t := .Values.temporal -}}
- --temporal-address={{ required "temporal.address is required" $t.address }}
- --namespace={{ required "temporal.namespace is required" $t.namespace }}
{{- if $t.tls.enabled }}
- --temporal-tls=true
{{- end }}
{{- with $t.tls.clientCertSecret }}
- --temporal-tls-cert=/etc/runnerflow/temporal-tls/tls.crt
- --temporal-tls-key=/etc/runnerflow/temporal-tls/tls.key
{{- end }}
{{- with $t.tls.caSecret }}
- --temporal-tls-ca=/etc/runnerflow/temporal-ca/ca.crt
{{- end }}
{{- with $t.tls.serverName }}
- --temporal-tls-server-name={{ . }}
{{- end }}
{{- with $t.apiKeySecret.name }}
- --temporal-api-key-file=/etc/runnerflow/temporal-api-key/{{ $t.apiKeySecret.key }}
{{- end }}
{{- end -}}

{{- define "runnerflow.temporalVolumeMounts" -}}
{{- $t := .Values.temporal -}}
{{- with $t.tls.clientCertSecret }}
- name: temporal-tls
  mountPath: /etc/runnerflow/temporal-tls
  readOnly: true
{{- end }}
{{- with $t.tls.caSecret }}
- name: temporal-ca
  mountPath: /etc/runnerflow/temporal-ca
  readOnly: true
{{- end }}
{{- with $t.apiKeySecret.name }}
- name: temporal-api-key
  mountPath: /etc/runnerflow/temporal-api-key
  readOnly: true
{{- end }}
{{- end -}}

{{- define "runnerflow.temporalVolumes" -}}
{{- $t := .Values.temporal -}}
{{- with $t.tls.clientCertSecret }}
- name: temporal-tls
  secret:
    secretName: {{ . }}
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
{{- end }}
{{- with $t.tls.caSecret }}
- name: temporal-ca
  secret:
    secretName: {{ . }}
    items:
      - {key: ca.crt, path: ca.crt}
{{- end }}
{{- with $t.apiKeySecret.name }}
- name: temporal-api-key
  secret:
    secretName: {{ . }}
    items:
      - {key: {{ $t.apiKeySecret.key }}, path: {{ $t.apiKeySecret.key }}}
{{- end }}
{{- end -}}

{{/* Scheduling and image pull settings of a pod; called with the worker's or starter's values. */}}
{{- define "runnerflow.podPlacement" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A container of the temporal CLI image (the search-attribute Job): image, the API key as
TEMPORAL_API_KEY (the CLI's own variable), the Temporal Secrets' mounts and the locked-down
security context. runnerflow.temporalCLIArgs are the CLI's connection flags.
*/}}
{{- define "runnerflow.temporalCLI" -}}
{{- $sa := .Values.searchAttributes -}}
image: {{ include "runnerflow.image" $sa.image }}
{{- with $sa.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- with .Values.temporal.apiKeySecret.name }}
env:
  - name: TEMPORAL_API_KEY
    valueFrom:
      secretKeyRef: {name: {{ . }}, key: {{ $.Values.temporal.apiKeySecret.key }}}
{{- end }}
resources:
  requests: {cpu: 10m, memory: 32Mi}
  limits: {memory: 128Mi}
securityContext:
  {{- toYaml .Values.containerSecurityContext | nindent 2 }}
{{- $mounts := include "runnerflow.temporalVolumeMounts" . | trim }}
{{- with $mounts }}
volumeMounts:
  {{- . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "runnerflow.temporalCLIArgs" -}}
{{- $t := .Values.temporal -}}
- --address={{ required "temporal.address is required" $t.address }}
- --namespace={{ required "temporal.namespace is required" $t.namespace }}
{{- if or $t.tls.enabled $t.tls.clientCertSecret $t.tls.caSecret $t.tls.serverName $t.apiKeySecret.name }}
- --tls=true
{{- end }}
{{- with $t.tls.clientCertSecret }}
- --tls-cert-path=/etc/runnerflow/temporal-tls/tls.crt
- --tls-key-path=/etc/runnerflow/temporal-tls/tls.key
{{- end }}
{{- with $t.tls.caSecret }}
- --tls-ca-path=/etc/runnerflow/temporal-ca/ca.crt
{{- end }}
{{- with $t.tls.serverName }}
- --tls-server-name={{ . }}
{{- end }}
{{- end -}}

{{/*
The warm namespace: warm.namespace, or "<release namespace>-warm". Never the release's own
(warm registrations would wait beside the runners) and never longer than a namespace name may be.
*/}}
{{- define "runnerflow.warmNamespace" -}}
{{- $ns := .Values.warm.namespace | default (printf "%s-warm" .Release.Namespace) -}}
{{- if eq $ns .Release.Namespace -}}
{{- fail (printf "warm.namespace is the release's namespace %s; warm registrations must wait apart from the runners (docs/security.md)" $ns) -}}
{{- end -}}
{{- if gt (len $ns) 63 -}}
{{- fail (printf "the warm namespace %s is longer than 63 characters; set warm.namespace" $ns) -}}
{{- end -}}
{{- $ns -}}
{{- end -}}

{{/*
The pools file: one YAML document per pool of .Values.pools. A pool without a namespace gets
the release's; another namespace is refused, because the worker's Role covers only this one.
*/}}
{{- define "runnerflow.poolsFile" -}}
{{- range $i, $p := .Values.pools }}
{{- if not $p.name }}
{{- fail (printf "pools[%d] has no name" $i) }}
{{- end }}
{{- $pool := deepCopy $p }}
{{- $ns := default $.Release.Namespace $pool.namespace }}
{{- if ne $ns $.Release.Namespace }}
{{- fail (printf "pool %s puts its runners in namespace %s; the worker's Role covers only the release's namespace %s" $pool.name $ns $.Release.Namespace) }}
{{- end }}
{{- $_ := set $pool "namespace" $ns }}
---
{{ toYaml $pool }}
{{- end }}
{{- end -}}
