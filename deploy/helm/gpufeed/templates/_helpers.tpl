{{/* The agent's name, as the plain manifests of deploy/kubernetes name it. */}}
{{- define "gpufeed.name" -}}gpufeed-agent{{- end -}}

{{/* The selector labels: the same on every object, as the plain manifests. */}}
{{- define "gpufeed.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpufeed.name" . }}
{{- end -}}

{{/* Labels of every object: the selector's, and Helm's own. */}}
{{- define "gpufeed.labels" -}}
{{ include "gpufeed.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The namespace of every object: namespace, else the release's. */}}
{{- define "gpufeed.namespace" -}}{{ .Values.namespace | default .Release.Namespace }}{{- end -}}

{{/* Whether the ServiceMonitor is rendered: serviceMonitor.enabled true,
     or auto where the cluster serves the Prometheus Operator's CRD. */}}
{{- define "gpufeed.serviceMonitor" -}}
{{- $e := toString .Values.serviceMonitor.enabled -}}
{{- if eq $e "true" -}}true
{{- else if eq $e "auto" -}}
{{- if or (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}true{{- end -}}
{{- else if ne $e "false" -}}{{ fail (printf "serviceMonitor.enabled %q: want auto, true or false" $e) }}
{{- end -}}
{{- end -}}

{{/* The runtime's record directory on the node, for --criRecords. */}}
{{- define "gpufeed.criPath" -}}
{{- if eq .Values.criRecords "containerd" -}}/run/containerd/io.containerd.runtime.v2.task/k8s.io
{{- else if eq .Values.criRecords "crio" -}}/run/containers/storage/overlay-containers
{{- else if ne .Values.criRecords "none" -}}{{ fail (printf "criRecords %q: want containerd, crio or none" .Values.criRecords) }}
{{- end -}}
{{- end -}}
