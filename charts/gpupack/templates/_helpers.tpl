{{/*
gpupack.fullname: the prefix of every object's name. A release named
gpupack (as deploy/ is rendered) gives gpupack, gpupack-scheduler, ...
*/}}
{{- define "gpupack.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* gpupack.labels COMPONENT: the labels of an object of that component. */}}
{{- define "gpupack.labels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: gpupack
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* gpupack.selector COMPONENT: the labels a Deployment selects its pods by. */}}
{{- define "gpupack.selector" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* gpupack.image NAME: the image reference of gpupack or gpupack-scheduler. */}}
{{- define "gpupack.image" -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .name (.root.Values.image.tag | default .root.Chart.AppVersion) -}}
{{- end -}}

{{/*
gpupack.podSecurity: the pod security context of every component: non-root
as the images' user, the runtime's default seccomp profile.
*/}}
{{- define "gpupack.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* gpupack.containerSecurity: the container security context of every component. */}}
{{- define "gpupack.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/*
gpupack.scheduling PART: nodeSelector, tolerations, affinity, priority and
pull secrets of a component's pods, from its values.
*/}}
{{- define "gpupack.scheduling" -}}
{{- with .part.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .part.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .part.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .part.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
gpupack.certificate: how the webhook gets its serving certificate,
cert-manager or self-managed, with auto resolved against the cluster's APIs.
*/}}
{{- define "gpupack.certificate" -}}
{{- $mode := .Values.webhook.certificate -}}
{{- if eq $mode "auto" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1" -}}cert-manager{{- else -}}self-managed{{- end -}}
{{- else -}}
{{- $mode -}}
{{- end -}}
{{- end -}}

{{/* gpupack.webhookDNSNames: the names the webhook's certificate is for. */}}
{{- define "gpupack.webhookDNSNames" -}}
{{- $svc := printf "%s-webhook" (include "gpupack.fullname" .) -}}
{{- list (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson -}}
{{- end -}}

{{/*
gpupack.webhookExcluded: the namespaces whose pods are never sent to the
webhook, as a JSON list: the system's and the release's own.
*/}}
{{- define "gpupack.webhookExcluded" -}}
{{- list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace | uniq | toJson -}}
{{- end -}}

{{/*
gpupack.webhookMatchConditions: the apiserver sends the webhook only pods
that ask for a GPU resource (nvidia.com/gpu, nvidia.com/gpu.shared and the
like, nvidia.com/mig-*: kube.IsGPUResource) in a container's or an init
container's requests or limits; the webhook changes no other pod, and
other pods never wait on it.
*/}}
{{- define "gpupack.webhookMatchConditions" -}}
{{- $gpu := "r == 'nvidia.com/gpu' || r.startsWith('nvidia.com/gpu.') || r.startsWith('nvidia.com/mig-')" -}}
{{- $container := printf "has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(r, %s)) || (has(c.resources.requests) && c.resources.requests.exists(r, %s)))" $gpu $gpu -}}
- name: asks-for-a-gpu
  expression: {{ printf "object.spec.containers.exists(c, %s) || (has(object.spec.initContainers) && object.spec.initContainers.exists(c, %s))" $container $container | quote }}
{{- end -}}
