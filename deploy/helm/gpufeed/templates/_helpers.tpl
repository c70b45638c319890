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
{{- end -}}

{{/* The runtime's record directory on the node, for --criRecords. */}}
{{- define "gpufeed.criPath" -}}
{{- if eq .Values.criRecords "containerd" -}}/run/containerd/io.containerd.runtime.v2.task/k8s.io
{{- else if eq .Values.criRecords "crio" -}}/run/containers/storage/overlay-containers
{{- else if ne .Values.criRecords "none" -}}{{ fail (printf "criRecords %q: want containerd, crio or none" .Values.criRecords) }}
{{- end -}}
{{- end -}}
