{{/* Names. Cluster-scoped objects the manager looks up by name (its webhook configurations)
keep the manager's fixed names; everything else is named after the release. */}}
{{- define "cerulean.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cerulean.manager" -}}{{ include "cerulean.fullname" . | trunc 55 | trimSuffix "-" }}-manager{{- end -}}
{{- define "cerulean.webhook" -}}{{ include "cerulean.fullname" . | trunc 55 | trimSuffix "-" }}-webhook{{- end -}}
{{- define "cerulean.nodeAgent" -}}{{ include "cerulean.fullname" . | trunc 52 | trimSuffix "-" }}-node-agent{{- end -}}
{{- define "cerulean.csiProvider" -}}{{ include "cerulean.fullname" . | trunc 50 | trimSuffix "-" }}-csi-provider{{- end -}}
{{- define "cerulean.cloudCA" -}}{{ include "cerulean.fullname" . | trunc 54 | trimSuffix "-" }}-cloud-ca{{- end -}}

{{- define "cerulean.labels" -}}
app.kubernetes.io/name: cerulean
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector: the labels that pick one component's pods (dict "ctx" $ "component" "manager") */}}
{{- define "cerulean.selector" -}}
app.kubernetes.io/name: cerulean
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "cerulean.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The cloud's settings, as every component reads them. */}}
{{- define "cerulean.azureEnv" -}}
{{- with .Values.azure.tenantID }}
- name: AZURE_TENANT_ID
  value: {{ . | quote }}
{{- end }}
{{- with .Values.azure.authorityHost }}
- name: AZURE_AUTHORITY_HOST
  value: {{ . | quote }}
{{- end }}
{{- with .Values.azure.resourceManagerEndpoint }}
- name: AZURE_RESOURCE_MANAGER_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.azure.resourceManagerAudience }}
- name: AZURE_RESOURCE_MANAGER_AUDIENCE
  value: {{ . | quote }}
{{- end }}
{{- if .Values.azure.caBundle }}
- name: SSL_CERT_FILE
  value: /etc/cerulean/cloud-ca/ca.crt
{{- end }}
{{- end -}}

{{- define "cerulean.caMount" -}}
{{- if .Values.azure.caBundle }}
- name: cloud-ca
  mountPath: /etc/cerulean/cloud-ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "cerulean.caVolume" -}}
{{- if .Values.azure.caBundle }}
- name: cloud-ca
  configMap:
    name: {{ include "cerulean.cloudCA" . }}
{{- end }}
{{- end -}}

{{/* The restricted container security context: non-root, read-only, nothing to escalate. */}}
{{- define "cerulean.restricted" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "cerulean.validate" -}}
{{- $t := .Values.manager.credential.type -}}
{{- if not (has $t (list "workloadIdentity" "secret" "none")) -}}
{{- fail (printf "manager.credential.type %q is none of workloadIdentity, secret, none" $t) -}}
{{- end -}}
{{- if and (eq $t "secret") (not .Values.manager.credential.secretName) -}}
{{- fail "manager.credential.type secret needs manager.credential.secretName" -}}
{{- end -}}
{{- if and (eq $t "workloadIdentity") .Values.manager.credential.clientID (or (not .Values.azure.tenantID) (not .Values.azure.subscriptionID)) -}}
{{- fail "manager.credential.clientID needs azure.tenantID and azure.subscriptionID (the manager's global credential)" -}}
{{- end -}}
{{- if not (has .Values.manager.podIdentity (list "standard" "managed" "off")) -}}
{{- fail (printf "manager.podIdentity %q is none of standard, managed, off" .Values.manager.podIdentity) -}}
{{- end -}}
{{- if ne (empty .Values.manager.webhook.proxyImage) (empty .Values.manager.webhook.proxyInitImage) -}}
{{- fail "manager.webhook.proxyImage and manager.webhook.proxyInitImage go together: set both or neither" -}}
{{- end -}}
{{- if and .Values.manager.leaderElection (lt (int .Values.manager.replicas) 1) -}}
{{- fail "manager.replicas must be at least 1" -}}
{{- end -}}
{{- end -}}
