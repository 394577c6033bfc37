{{/*
Labels of every object and the DaemonSet's selector. Names are fixed
("vpcnet"): a cluster runs one pod network, and fixed names keep this chart's
objects identical to deploy/vpcnet.yaml.
*/}}
{{- define "vpcnet.labels" -}}
app.kubernetes.io/name: vpcnet
{{- end }}

{{/* Labels of the budget controller's objects and its Deployment's selector. */}}
{{- define "vpcnet.budgetLabels" -}}
app.kubernetes.io/name: vpcnet-budget
{{- end }}

{{/*
vpcnet.budgetSettings are the budget controller's settings budget.env may
set (docs/settings.md; a test in deploy/ keeps the list whole).
*/}}
{{- define "vpcnet.budgetSettings" -}}
[VPCNET_BUDGET_LEASE_DURATION, VPCNET_BUDGET_RENEW_DEADLINE, VPCNET_BUDGET_RETRY_PERIOD, VPCNET_BUDGET_MARGIN, VPCNET_BUDGET_BUCKETS, VPCNET_BUDGET_CLIENTS, VPCNET_BUDGET_KUBECONFIG]
{{- end }}

{{/*
vpcnet.image is the image reference; the tag defaults to the chart's
appVersion.
*/}}
{{- define "vpcnet.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
vpcnet.envValue is a value of .Values.env as the agent reads it: maps (such
as ADDITIONAL_ENI_TAGS) as JSON, lists (such as
AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS) comma-separated, anything else as text.
*/}}
{{- define "vpcnet.envValue" -}}
{{- if kindIs "map" . }}{{ toJson . }}
{{- else if kindIs "slice" . }}{{ join "," . }}
{{- else if not (kindIs "invalid" .) }}{{ toString . }}
{{- end }}
{{- end }}

{{/* vpcnet.isTrue is "true" when the agent reads the value as true. */}}
{{- define "vpcnet.isTrue" -}}
{{- if has (include "vpcnet.envValue" .) (list "1" "t" "T" "TRUE" "true" "True") }}true{{ end }}
{{- end }}

{{/*
vpcnet.env lists the settings whose values differ from the agent's defaults:
the agent applies its defaults itself, so a default value needs no variable.
*/}}
{{- define "vpcnet.env" -}}
{{- $defaults := include "vpcnet.settingDefaults" . | fromYaml }}
{{- range $name, $value := .Values.env }}
{{- if eq $name "MY_NODE_NAME" }}
{{- fail "env.MY_NODE_NAME: the chart sets it from the downward API (spec.nodeName); remove it from your values" }}
{{- end }}
{{- if not (hasKey $defaults $name) }}
{{- fail (printf "env.%s is not a vpcnetd setting (docs/settings.md lists them); put other variables in extraEnv" $name) }}
{{- end }}
{{- $v := include "vpcnet.envValue" $value }}
{{- if and (eq $name "VPCNET_BUDGET_LEASE") $.Values.budget.enabled (ne $v "") }}
{{- fail "env.VPCNET_BUDGET_LEASE: with budget.enabled the chart points the agents at its own controller's Lease; set budget.enabled=false to name another" }}
{{- end }}
{{- if and (ne $v "") (ne $v (index $defaults $name)) }}
- name: {{ $name }}
  value: {{ $v | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
vpcnet.probeAddr is the host:port the kubelet probes /healthz and /readyz
on: the introspection endpoint, or the metrics endpoint when introspection
is off or on a unix socket (both serve the health endpoints).
*/}}
{{- define "vpcnet.probeAddr" -}}
{{- $env := .Values.env }}
{{- $intro := include "vpcnet.envValue" $env.INTROSPECTION_BIND_ADDRESS }}
{{- if and (not (include "vpcnet.isTrue" $env.DISABLE_INTROSPECTION)) (not (hasPrefix "unix:" $intro)) }}
{{- $intro }}
{{- else if not (include "vpcnet.isTrue" $env.DISABLE_METRICS) }}
{{- include "vpcnet.envValue" $env.VPCNET_METRICS_BIND_ADDRESS }}
{{- else }}
{{- fail "env: with DISABLE_METRICS and DISABLE_INTROSPECTION (or a unix: INTROSPECTION_BIND_ADDRESS) the kubelet has no endpoint to probe; keep one of them on a TCP address" }}
{{- end }}
{{- end }}

{{/* vpcnet.port is the port of a host:port address. */}}
{{- define "vpcnet.port" -}}
{{- regexFind "[0-9]+$" . }}
{{- end }}

{{/*
vpcnet.probeHost is the probe's host field: empty (the pod's address, which
is the node's) when the endpoint listens on every address.
*/}}
{{- define "vpcnet.probeHost" -}}
{{- $host := regexReplaceAll ":[0-9]+$" . "" | trimPrefix "[" | trimSuffix "]" }}
{{- if not (has $host (list "" "0.0.0.0" "::")) }}{{ $host }}{{ end }}
{{- end }}
