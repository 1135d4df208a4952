{{/* Every object's name (or its prefix): the release name unless fullnameOverride. */}}
{{- define "kwop.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kwop.selectorLabels" -}}
app.kubernetes.io/name: kwop
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kwop.labels" -}}
{{ include "kwop.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kwop.subject" -}}
- kind: ServiceAccount
  name: {{ include "kwop.fullname" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{- define "kwop.webhookSecret" -}}
{{ include "kwop.fullname" . }}-webhook-tls
{{- end -}}

{{/* Sharded: replicas share the work. */}}
{{- define "kwop.sharded" -}}
{{- if and .Values.sharding.enabled (gt (int .Values.replicas) 1) }}true{{ end -}}
{{- end -}}

{{/*
A kind's plural, as kube-rs guesses it (host/src/vocab/rbac.rs falls back to the same): the
lowercase kind, +es after s, x, z, ch, sh; consonant+y -> ies; else +s.
*/}}
{{- define "kwop.plural" -}}
{{- $w := lower . -}}
{{- if or (eq $w "endpoints") (eq $w "endpointslices") -}}{{ $w }}
{{- else if regexMatch "(s|x|z|ch|sh)$" $w -}}{{ $w }}es
{{- else if regexMatch "[^aeiou]y$" $w -}}{{ trimSuffix "y" $w }}ies
{{- else -}}{{ $w }}s
{{- end -}}
{{- end -}}

{{/*
A grant's kind as {group, kind, plural, namespaced}: built-in cluster-scoped kinds are known
(as in host/src/vocab/rbac.rs), the plugin's rbac.resources (KIND.GROUP) override.
Input: dict "ref" {apiVersion, kind} "overrides" {...}.
*/}}
{{- define "kwop.kind" -}}
{{- $parts := splitList "/" .ref.apiVersion -}}
{{- $group := "" -}}
{{- if eq (len $parts) 2 }}{{ $group = first $parts }}{{ end -}}
{{- $key := printf "%s.%s" .ref.kind $group -}}
{{- $clusterScoped := list "Namespace." "Node." "PersistentVolume." "ClusterRole.rbac.authorization.k8s.io" "ClusterRoleBinding.rbac.authorization.k8s.io" "StorageClass.storage.k8s.io" "CustomResourceDefinition.apiextensions.k8s.io" "IngressClass.networking.k8s.io" -}}
{{- $plural := include "kwop.plural" .ref.kind -}}
{{- $namespaced := not (has $key $clusterScoped) -}}
{{- $o := get .overrides $key -}}
{{- if $o -}}
{{- $plural = default $plural $o.plural -}}
{{- if hasKey $o "namespaced" }}{{ $namespaced = $o.namespaced }}{{ end -}}
{{- end -}}
{{- toYaml (dict "group" $group "kind" .ref.kind "plural" $plural "namespaced" $namespaced) -}}
{{- end -}}

{{/* Adds verbs to the rule for (group, resource) of a rule set {keys, rules}. */}}
{{- define "kwop.addRule" -}}
{{- $key := printf "%s|%s" .group .resource -}}
{{- if not (hasKey .into.rules $key) -}}
{{- $_ := set .into "keys" (append .into.keys $key) -}}
{{- $_ := set .into.rules $key (dict "apiGroups" (list .group) "resources" (list .resource) "verbs" (list)) -}}
{{- end -}}
{{- $r := get .into.rules $key -}}
{{- range .verbs -}}
{{- if not (has . $r.verbs) }}{{ $_ := set $r "verbs" (append $r.verbs .) }}{{ end -}}
{{- end -}}
{{- end -}}

{{/*
The rules the host needs for one plugin of the values (the same as `kwop plugin rbac`,
host/src/vocab/rbac.rs): get/list/watch on every granted kind, cluster-wide; patch on the
primary's /status (and the primary when it finalizes); create/patch/delete on owned kinds — in a
Role per granted namespace when the grants list namespaces (namespaced kinds), else cluster-wide;
get on the primary's CRD by name when it validates, get and patch when its conversion is granted (a custom
primary: not in a built-in group).
Prints {cluster: [rules], local: [rules]}.
*/}}
{{- define "kwop.pluginRules" -}}
{{- $g := .spec.grants -}}
{{- $rbac := .rbac | default dict -}}
{{- $over := $rbac.resources | default dict -}}
{{- $listed := not (empty $g.namespaces) -}}
{{- $cluster := dict "keys" (list) "rules" dict -}}
{{- $local := dict "keys" (list) "rules" dict -}}
{{- $refs := list $g.primary -}}
{{- range $g.owns }}{{ $refs = append $refs . }}{{ end -}}
{{- range $g.reads }}{{ $refs = append $refs . }}{{ end -}}
{{- $seen := dict -}}
{{- range $refs -}}
{{- $k := include "kwop.kind" (dict "ref" . "overrides" $over) | fromYaml -}}
{{- $id := printf "%s|%s" $k.group $k.kind -}}
{{- if not (hasKey $seen $id) -}}
{{- $_ := set $seen $id true -}}
{{- include "kwop.addRule" (dict "into" $cluster "group" $k.group "resource" $k.plural "verbs" (list "get" "list" "watch")) -}}
{{- end -}}
{{- end -}}
{{- $writes := list (dict "ref" $g.primary "sub" "/status" "verbs" (list "patch")) -}}
{{- if $rbac.finalizes }}{{ $writes = append $writes (dict "ref" $g.primary "sub" "" "verbs" (list "patch")) }}{{ end -}}
{{- range $g.owns }}{{ $writes = append $writes (dict "ref" . "sub" "" "verbs" (list "create" "patch" "delete")) }}{{ end -}}
{{- range $writes -}}
{{- $k := include "kwop.kind" (dict "ref" .ref "overrides" $over) | fromYaml -}}
{{- $into := $cluster -}}
{{- if and $listed $k.namespaced }}{{ $into = $local }}{{ end -}}
{{- include "kwop.addRule" (dict "into" $into "group" $k.group "resource" (printf "%s%s" $k.plural .sub) "verbs" .verbs) -}}
{{- end -}}
{{- $out := dict "cluster" (list) "local" (list) -}}
{{- range $cluster.keys }}{{ $_ := set $out "cluster" (append $out.cluster (get $cluster.rules .)) }}{{ end -}}
{{- $p := include "kwop.kind" (dict "ref" $g.primary "overrides" $over) | fromYaml -}}
{{- $builtinGroups := list "" "admissionregistration.k8s.io" "apiextensions.k8s.io" "apiregistration.k8s.io" "apps" "authentication.k8s.io" "authorization.k8s.io" "autoscaling" "batch" "certificates.k8s.io" "coordination.k8s.io" "discovery.k8s.io" "events.k8s.io" "flowcontrol.apiserver.k8s.io" "internal.apiserver.k8s.io" "networking.k8s.io" "node.k8s.io" "policy" "rbac.authorization.k8s.io" "resource.k8s.io" "scheduling.k8s.io" "storage.k8s.io" "storagemigration.k8s.io" -}}
{{- $crdVerbs := list -}}
{{- if or $rbac.validates $g.conversion }}{{ $crdVerbs = append $crdVerbs "get" }}{{ end -}}
{{- if $g.conversion }}{{ $crdVerbs = append $crdVerbs "patch" }}{{ end -}}
{{- if and $crdVerbs (not (has $p.group $builtinGroups)) -}}
{{- $crd := dict "apiGroups" (list "apiextensions.k8s.io") "resources" (list "customresourcedefinitions") "resourceNames" (list (printf "%s.%s" $p.plural $p.group)) "verbs" $crdVerbs -}}
{{- $_ := set $out "cluster" (append $out.cluster $crd) -}}
{{- end -}}
{{- range $local.keys }}{{ $_ := set $out "local" (append $out.local (get $local.rules .)) }}{{ end -}}
{{- toYaml $out -}}
{{- end -}}
