{{/* The credentials Secret of the storage locations. */}}
{{- define "backstop.credentialsSecret" -}}
{{- if .Values.credentials.existingSecret -}}
{{ .Values.credentials.existingSecret }}
{{- else -}}
{{ .Values.credentials.name | default (printf "%s-cloud-credentials" .Release.Name) }}
{{- end -}}
{{- end -}}

{{/* The configuration's manifests (--configuration-dir), by file name. */}}
{{- define "backstop.configuration" -}}
{{- $root := . }}
{{- with .Values.configuration.backupStorageLocation }}
locations.yaml: |
{{- range $i, $l := . }}
  {{- if $i }}
  ---
  {{- end }}
  apiVersion: velero.io/v1
  kind: BackupStorageLocation
  metadata:
    name: {{ $l.name | default "default" }}
    {{- with $l.annotations }}
    annotations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  spec:
    provider: {{ required "configuration.backupStorageLocation[].provider" $l.provider }}
    objectStorage:
      bucket: {{ required "configuration.backupStorageLocation[].bucket" $l.bucket | quote }}
      {{- with $l.prefix }}
      prefix: {{ . | quote }}
      {{- end }}
      {{- with $l.caCert }}
      caCert: {{ . }}
      {{- end }}
    {{- if $l.default }}
    default: true
    {{- end }}
    {{- with $l.accessMode }}
    accessMode: {{ . }}
    {{- end }}
    {{- with $l.validationFrequency }}
    validationFrequency: {{ . }}
    {{- end }}
    {{- if $l.credential }}
    credential:
      name: {{ $l.credential.name }}
      key: {{ $l.credential.key }}
    {{- else if and $root.Values.credentials.useSecret (or $root.Values.credentials.existingSecret $root.Values.credentials.secretContents) }}
    credential:
      name: {{ include "backstop.credentialsSecret" $root }}
      key: cloud
    {{- end }}
    {{- with $l.config }}
    config:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- end }}
{{- with .Values.configuration.volumeSnapshotLocation }}
snapshot-locations.yaml: |
{{- range $i, $l := . }}
  {{- if $i }}
  ---
  {{- end }}
  apiVersion: velero.io/v1
  kind: VolumeSnapshotLocation
  metadata:
    name: {{ $l.name | default "default" }}
    {{- with $l.annotations }}
    annotations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  spec:
    provider: {{ required "configuration.volumeSnapshotLocation[].provider" $l.provider }}
    {{- with $l.credential }}
    credential:
      name: {{ .name }}
      key: {{ .key }}
    {{- end }}
    {{- with $l.config }}
    config:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- end }}
{{- with .Values.nonAdmin.policy }}
policy.yaml: |
  apiVersion: oadp.openshift.io/v1alpha1
  kind: DataProtectionApplication
  metadata:
    name: {{ $root.Release.Name }}
  spec:
    nonAdmin:
      {{- toYaml . | nindent 6 }}
{{- end }}
{{- $schedules := dict }}
{{- range $name, $s := .Values.schedules }}
{{- if not $s.disabled }}
{{- $_ := set $schedules $name $s }}
{{- end }}
{{- end }}
{{- with $schedules }}
schedules.yaml: |
{{- range $i, $name := keys . | sortAlpha }}
  {{- $s := get $schedules $name }}
  {{- if $i }}
  ---
  {{- end }}
  apiVersion: velero.io/v1
  kind: Schedule
  metadata:
    name: {{ $root.Release.Name }}-{{ $name }}
    {{- with $s.labels }}
    labels:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with $s.annotations }}
    annotations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  spec:
    schedule: {{ required (printf "schedules.%s.schedule" $name) $s.schedule | quote }}
    {{- if hasKey $s "useOwnerReferencesInBackup" }}
    useOwnerReferencesInBackup: {{ $s.useOwnerReferencesInBackup }}
    {{- end }}
    {{- if hasKey $s "paused" }}
    paused: {{ $s.paused }}
    {{- end }}
    {{- if hasKey $s "skipImmediately" }}
    skipImmediately: {{ $s.skipImmediately }}
    {{- end }}
    template:
      {{- toYaml ($s.template | default dict) | nindent 6 }}
{{- end }}
{{- end }}
{{- end -}}
