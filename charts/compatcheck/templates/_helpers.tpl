{{/* Names and labels */}}
{{- define "compatcheck.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "compatcheck.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "compatcheck.labels" -}}
{{ include "compatcheck.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "compatcheck.tlsSecret" -}}
{{- default (printf "%s-tls" (include "compatcheck.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{- define "compatcheck.needsApi" -}}
{{- if or (eq .Values.clusterView.mode "live") (eq .Values.tls.mode "self-managed") -}}true{{- end -}}
{{- end -}}

{{/* CEL: does the pod spec at path . request any extended (domain-qualified) resource? */}}
{{- define "compatcheck.celContainers" -}}
{{ .p }}.{{ .f }}.exists(c, has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, k.contains('/'))) || (has(c.resources.requests) && c.resources.requests.exists(k, k.contains('/')))))
{{- end -}}
{{/* ... or any DRA resource claim (spec.resourceClaims)? */}}
{{- define "compatcheck.celPodSpec" -}}
(has({{ . }}.containers) && {{ include "compatcheck.celContainers" (dict "p" . "f" "containers") }}) || (has({{ . }}.initContainers) && {{ include "compatcheck.celContainers" (dict "p" . "f" "initContainers") }}) || (has({{ . }}.resourceClaims) && size({{ . }}.resourceClaims) > 0)
{{- end -}}

{{/* ... or KAI Scheduler's GPU sharing annotations on the metadata at path . */}}
{{- define "compatcheck.celKai" -}}
(has({{ . }}.annotations) && ('gpu-fraction' in {{ . }}.annotations || 'gpu-memory' in {{ . }}.annotations))
{{- end -}}

{{/* A pod template (PodTemplateSpec) at the path of fields . under object (a list: spec, template): its pod spec
asks for GPUs, or its metadata carries KAI's annotations. One definition for every built-in kind of the workload
table (compatcheck/core/workloads.py) that has a CEL filter; tests/test_chart.py derives the objects from the table. */}}
{{- define "compatcheck.celTemplate" -}}
{{- $p := "object" -}}{{- $has := list -}}
{{- range . -}}{{- $p = printf "%s.%s" $p . -}}{{- $has = append $has (printf "has(%s)" $p) -}}{{- end -}}
{{ join " && " $has }} && ((has({{ $p }}.spec) && ({{ include "compatcheck.celPodSpec" (printf "%s.spec" $p) }})) || (has({{ $p }}.metadata) && {{ include "compatcheck.celKai" (printf "%s.metadata" $p) }}))
{{- end -}}

{{/* The groups of objects the webhooks see: rules plus the CEL that narrows them to GPU objects. */}}
{{- define "compatcheck.groups" -}}
- name: pods
  rules:
    - {apiGroups: [""], apiVersions: ["v1"], resources: [pods]}
  cel: {{ printf "%s || %s" (include "compatcheck.celPodSpec" "object.spec") (include "compatcheck.celKai" "object.metadata") | quote }}
- name: workloads
  rules:
    - {apiGroups: [apps], apiVersions: ["v1"], resources: [deployments, statefulsets, daemonsets, replicasets]}
    - {apiGroups: [batch], apiVersions: ["v1"], resources: [jobs]}
    - {apiGroups: [""], apiVersions: ["v1"], resources: [replicationcontrollers]}
  cel: {{ include "compatcheck.celTemplate" (list "spec" "template") | quote }}
- name: cronjobs
  rules:
    - {apiGroups: [batch], apiVersions: ["v1"], resources: [cronjobs]}
  cel: {{ include "compatcheck.celTemplate" (list "spec" "jobTemplate" "spec" "template") | quote }}
- name: podtemplates
  rules:
    - {apiGroups: [""], apiVersions: ["v1"], resources: [podtemplates]}
  cel: {{ include "compatcheck.celTemplate" (list "template") | quote }}
{{- if .Values.clusterView.dra }}
- name: resource-claims
  rules:
    - {apiGroups: [resource.k8s.io], apiVersions: ["v1", "v1beta2", "v1beta1"], resources: [resourceclaims, resourceclaimtemplates]}
  cel: ""
{{- end }}
{{- if .Values.webhook.customResources }}
- name: custom-resources
  rules:
{{- range .Values.webhook.customResources }}
    - {apiGroups: {{ toJson .apiGroups }}, apiVersions: ["*"], resources: {{ toJson .resources }}, scope: {{ .scope | default "Namespaced" }}}
{{- end }}
  cel: ""
{{- end }}
{{- end -}}

{{- define "compatcheck.namespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ toJson (concat (list "kube-system" "kube-node-lease" .Release.Namespace) .Values.webhook.excludeNamespaces) }}
  - key: compatcheck.io/ignore
    operator: NotIn
    values: ["true"]
{{- end -}}

{{- define "compatcheck.objectSelector" -}}
matchExpressions:
  - key: compatcheck.io/ignore
    operator: NotIn
    values: ["true"]
{{- end -}}

{{- define "compatcheck.clientConfig" -}}
{{- with .root.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" .) $.path | quote }}
{{- else }}
service:
  name: {{ include "compatcheck.fullname" .root }}
  namespace: {{ .root.Release.Namespace }}
  path: {{ .path }}
  port: {{ .root.Values.service.port }}
{{- end }}
{{- if eq .root.Values.tls.mode "secret" }}
caBundle: {{ required "tls.caBundle is required when tls.mode is secret" .root.Values.tls.caBundle }}
{{- end }}
{{- end -}}

{{/* The host of webhook.url without port or IPv6 brackets: a name or an IP the serving certificate must cover. */}}
{{- define "compatcheck.urlHost" -}}
{{- regexReplaceAll `^\[?([^\]]*?)\]?(:[0-9]+)?$` (urlParse .Values.webhook.url).host "${1}" -}}
{{- end -}}

{{- define "compatcheck.injectAnnotation" -}}
{{- if eq .Values.tls.mode "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "compatcheck.fullname" .) }}
{{- end }}
{{- end -}}
