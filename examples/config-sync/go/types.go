// The objects config-sync reads and writes: the ConfigSync custom resource (spec and status),
// and narrow views of the source, of Namespaces and of the copies it owns. Every field is
// optional, so an object decodes whatever it holds: a spec the CRD would refuse becomes an
// InvalidSpec condition, not a decode failure, and a source's data is never inspected — it is
// copied as the JSON it is (json.RawMessage), so no error message can ever quote a value.

package main

import (
	"encoding/json"
	"sort"

	"kwop.dev/guest"
)

// ConfigSync is examples.kwop.dev/v1alpha1 ConfigSync (cluster-scoped).
type ConfigSync struct {
	guest.TypeMeta   `json:",inline"`
	guest.ObjectMeta `json:"metadata"`
	Spec             ConfigSyncSpec    `json:"spec"`
	Status           *ConfigSyncStatus `json:"status,omitempty"`
}

// ConfigSyncSpec names the source and the namespaces to copy it to.
type ConfigSyncSpec struct {
	Source            SourceRef     `json:"source"`
	NamespaceSelector LabelSelector `json:"namespaceSelector"`
}

// SourceRef is spec.source.
type SourceRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// LabelSelector is metav1.LabelSelector.
type LabelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []Requirement     `json:"matchExpressions,omitempty"`
}

// Requirement is metav1.LabelSelectorRequirement.
type Requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// ConfigSyncStatus is the ConfigSync's status.
type ConfigSyncStatus struct {
	ObservedGeneration *int64            `json:"observedGeneration,omitempty"`
	Conditions         []guest.Condition `json:"conditions,omitempty"`
	Synced             uint32            `json:"synced"`
	Conflicts          []string          `json:"conflicts,omitempty"`
}

// Kind is the kind of a source and its copies: ConfigMap or Secret.
type Kind string

const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
)

// GVK is the kind's group/version/kind (core group, v1).
func (k Kind) GVK() guest.GVK { return guest.GVK{Version: "v1", Kind: string(k)} }

func parseKind(s string) (Kind, bool) {
	switch Kind(s) {
	case ConfigMap, Secret:
		return Kind(s), true
	}
	return "", false
}

// Source is what a copy takes from the source: its data, as JSON, unread.
type Source struct {
	Data       json.RawMessage `json:"data"`
	BinaryData json.RawMessage `json:"binaryData"`
	Type       json.RawMessage `json:"type"`
}

// Namespace is the part of a Namespace config-sync reads.
type Namespace struct {
	Metadata struct {
		Name              string          `json:"name"`
		DeletionTimestamp json.RawMessage `json:"deletionTimestamp"`
	} `json:"metadata"`
	Status *struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// terminating: being deleted (the API server refuses creates there).
func (n *Namespace) terminating() bool {
	if t := n.Metadata.DeletionTimestamp; len(t) > 0 && string(t) != "null" {
		return true
	}
	return n.Status != nil && n.Status.Phase == "Terminating"
}

// CopyRef names one copy.
type CopyRef struct {
	Kind      Kind
	Namespace string
	Name      string
}

// copiesOf is the copies among the owned objects (v1 ConfigMaps and Secrets with a namespace and
// a name), sorted, without duplicates.
func copiesOf(owned [][]byte) []CopyRef {
	var out []CopyRef
	seen := map[CopyRef]bool{}
	for _, o := range owned {
		var m struct {
			guest.TypeMeta `json:",inline"`
			Metadata       guest.ObjectMeta `json:"metadata"`
		}
		if json.Unmarshal(o, &m) != nil || m.APIVersion != "v1" {
			continue
		}
		k, ok := parseKind(m.Kind)
		c := CopyRef{k, m.Metadata.Namespace, m.Metadata.Name}
		if !ok || c.Namespace == "" || c.Name == "" || seen[c] {
			continue
		}
		seen[c] = true
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}

func less(a, b CopyRef) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
