{{/*
Every object carries the labels manifests/ gives it: app.kubernetes.io/name and, for a
component's objects, app.kubernetes.io/component. Nothing else, so that the chart and the
kustomize overlays render the same objects (test/chart).
*/}}
{{- define "nodeguard.labels" -}}
app.kubernetes.io/name: nodeguard
{{- with . }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* The chart refuses a release namespace it creates itself. */}}
{{- define "nodeguard.checkReleaseNamespace" -}}
{{- if has .Release.Namespace (list "nodeguard" "nodeguard-agent" "kubelet-configs") -}}
{{- fail (printf "release namespace %q: the chart creates the namespaces nodeguard, nodeguard-agent and kubelet-configs itself (with their Pod Security labels) and deletes them on uninstall; install the release into another namespace that exists, e.g. --namespace kube-system" .Release.Namespace) -}}
{{- end -}}
{{- end }}

{{/* An image reference: repository@digest, else repository:tag. */}}
{{- define "nodeguard.image" -}}
{{- $image := index .root.Values.images .name -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else if $image.tag -}}
{{- printf "%s:%s" $image.repository $image.tag -}}
{{- else -}}
{{- fail (printf "images.%s: set digest (or tag for loaded images): the chart runs images by digest; `make images` writes them into _output/images/values.yaml (docs/images.md)" .name) -}}
{{- end -}}
{{- end }}

{{/* The NodeguardPolicy file. */}}
{{- define "nodeguard.policy" -}}
{{- .Values.policy | default (.Files.Get "files/policy.yaml") -}}
{{- end }}

{{/*
The agents' policy ConfigMap is named after its content, as kustomize's configMapGenerator
names it, so that an edit rolls the DaemonSet. Its hasher takes the sha256 of the JSON of kind,
name and data, and maps 0, 1, 3, a, e of the first ten hex digits to g, h, k, m, t; the name
it reads is always empty (it looks the field up as "metadata/name", one key), and so it is here.
test/chart checks the names agree.
*/}}
{{- define "nodeguard.agentPolicyName" -}}
{{- $encoded := toJson (dict "data" (dict "policy.yaml" (include "nodeguard.policy" .)) "kind" "ConfigMap" "name" "") -}}
{{- $hash := sha256sum $encoded | trunc 10 | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" -}}
{{- printf "nodeguard-policy-%s" $hash -}}
{{- end }}

{{/* The scrape annotations of a pod template. */}}
{{- define "nodeguard.scrapeAnnotations" -}}
{{- if .root.Values.metrics.scrapeAnnotations }}
annotations:
  prometheus.io/scrape: "true"
  {{- with .scheme }}
  prometheus.io/scheme: {{ . }}
  {{- end }}
  prometheus.io/port: {{ .port | quote }}
  prometheus.io/path: /metrics
{{- end }}
{{- end }}

{{/* How kube-apiserver calls the admission webhooks, and the CA it trusts. */}}
{{- define "nodeguard.clientConfig" -}}
service:
  namespace: nodeguard
  name: nodeguard-webhook
  path: /validate
  port: 443
{{- if eq .Values.certificates.source "static" }}
caBundle: {{ required "certificates.static.servingCA is required with certificates.source static (--set-file certificates.static.servingCA=.../webhook-ca.crt)" .Values.certificates.static.servingCA | b64enc }}
{{- end }}
{{- end }}
