{{/* The chart's name (nameOverride replaces it in names and in the app.kubernetes.io/name label). */}}
{{- define "kruise-admission.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's name for every object: fullnameOverride, else the release name when it contains the
chart's name, else release-chart.
*/}}
{{- define "kruise-admission.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "kruise-admission.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kruise-admission.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kruise-admission.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kruise-admission.labels" -}}
{{ include "kruise-admission.selectorLabels" . }}
app.kubernetes.io/component: admission-webhook
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret holding tls.crt and tls.key, whatever the cert mode. */}}
{{- define "kruise-admission.certSecret" -}}
{{- $default := printf "%s-tls" (include "kruise-admission.fullname" .) -}}
{{- if eq .Values.certs.mode "self-managed" -}}
{{- .Values.certs.selfManaged.secretName | default $default -}}
{{- else if eq .Values.certs.mode "provided" -}}
{{- .Values.certs.provided.secretName | default $default -}}
{{- else -}}
{{- $default -}}
{{- end -}}
{{- end -}}

{{/* The name of both webhook configurations: <fullname>, or <fullname>-shadow with shadow.enabled. */}}
{{- define "kruise-admission.webhookConfigurations" -}}
{{- if .Values.shadow.enabled -}}
{{- printf "%s-shadow" (include "kruise-admission.fullname" .) -}}
{{- else -}}
{{- include "kruise-admission.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* The generated webhook table (`kruise-admission manifests chart-table`). */}}
{{- define "kruise-admission.table" -}}
{{- .Files.Get "files/webhooks.json" -}}
{{- end -}}

{{/* Does the API server need a token (live mode or self-managed certificates)? */}}
{{- define "kruise-admission.needsApi" -}}
{{- if or .Values.liveCluster.enabled (eq .Values.certs.mode "self-managed") -}}true{{- end -}}
{{- end -}}

{{/* The ConfigMap holding the CA of the API server's client certificate (clientAuth). */}}
{{- define "kruise-admission.clientCaConfigMap" -}}
{{- .Values.clientAuth.caConfigMap | default (printf "%s-client-ca" (include "kruise-admission.fullname" .)) -}}
{{- end -}}

{{/*
A memory quantity in bytes: a plain number, or an integer with Ki, Mi, Gi or Ti. Empty for any
other form (e.g. 0.5Gi, 256M), which the budget check then skips rather than guess.
*/}}
{{- define "kruise-admission.bytes" -}}
{{- $q := . -}}
{{- if or (kindIs "float64" $q) (kindIs "int64" $q) (kindIs "int" $q) -}}
{{- $q | int64 -}}
{{- else if kindIs "string" $q -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- if regexMatch "^[0-9]+$" $q -}}
{{- $q -}}
{{- else if regexMatch "^[0-9]+(Ki|Mi|Gi|Ti)$" $q -}}
{{- $unit := regexFind "(Ki|Mi|Gi|Ti)$" $q -}}
{{- mul (trimSuffix $unit $q | int64) (get $units $unit | int64) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The webhook port: hostNetwork.port on the host network (where 9443 may be taken), else 9443. */}}
{{- define "kruise-admission.webhookPort" -}}
{{- if .Values.hostNetwork.enabled -}}{{ .Values.hostNetwork.port | int }}{{- else -}}9443{{- end -}}
{{- end -}}

{{/* The metrics and probe port: hostNetwork.metricsPort on the host network, else metrics.port. */}}
{{- define "kruise-admission.metricsPort" -}}
{{- if .Values.hostNetwork.enabled -}}{{ .Values.hostNetwork.metricsPort | int }}{{- else -}}{{ .Values.metrics.port | int }}{{- end -}}
{{- end -}}

{{/* The PriorityClass the pods run with: priorityClassName, else the chart's own when it creates one. */}}
{{- define "kruise-admission.priorityClassName" -}}
{{- if .Values.priorityClassName -}}
{{- .Values.priorityClassName -}}
{{- else if .Values.priorityClass.create -}}
{{- include "kruise-admission.fullname" . -}}
{{- end -}}
{{- end -}}

{{/*
The label matchers that select this release's own series in the PrometheusRule: what the chart's
ServiceMonitor gives them (job is the Service's name), unless metrics.prometheusRule.selector says.
*/}}
{{- define "kruise-admission.metricSelector" -}}
{{- .Values.metrics.prometheusRule.selector | default (printf "job=\"%s\", namespace=\"%s\"" (include "kruise-admission.fullname" .) .Release.Namespace) -}}
{{- end -}}
