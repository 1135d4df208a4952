// The config-sync decisions — which copies to apply, which to delete, the status and the events —
// as plain functions over typed inputs (the Rust example's src/sync.rs, rule for rule):
//   - an object config-sync did not create is never written or deleted (a conflict instead);
//   - a source that is briefly missing, or a spec that is invalid, never wipes the copies;
//   - a Secret's data appears only in the apply intents: events, status and messages name
//     kinds, namespaces, names and counts, never a value.

package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"kwop.dev/guest"
)

const (
	Ready             = "Ready"
	Synced            = "Synced"
	Conflict          = "Conflict"
	SourceNotFound    = "SourceNotFound"
	InvalidSpec       = "InvalidSpec"
	ErrResourceExists = "ErrResourceExists"
	Cleaned           = "Cleaned"
	// SourceAnnotation is on each copy: <namespace>/<name> of its source.
	SourceAnnotation = "examples.kwop.dev/config-sync-source"
	// MaxConflictEvents: at most this many ErrResourceExists events per reconcile.
	MaxConflictEvents = 5
	namedInMessage    = 3
)

// World is what a reconcile reads besides its ConfigSync.
type World struct {
	Source     func(kind Kind, namespace, name string) (*Source, error)
	Namespaces func(selector string) ([]*Namespace, error)
	Exists     func(kind Kind, namespace, name string) bool
	Owned      []CopyRef
}

// Decision is what one reconcile decided.
type Decision struct {
	Apply  []map[string]any
	Delete []CopyRef
	Status ConfigSyncStatus
	Events []guest.Event
}

func decide(cs *ConfigSync, w World, cond func(t string, s guest.ConditionStatus, reason, msg string) guest.Condition) (Decision, error) {
	src := cs.Spec.Source
	kind, why := checkSource(src)
	if why != "" {
		return held(cs, InvalidSpec, why, cond), nil
	}
	query, err := toQuery(cs.Spec.NamespaceSelector)
	if err != nil {
		return held(cs, InvalidSpec, err.Error(), cond), nil
	}
	source, err := w.Source(kind, src.Namespace, src.Name)
	if guest.IsNotFound(err) {
		why := fmt.Sprintf("source %s %s not found in namespace %s: the existing copies are kept until it is back",
			kind, strconv.Quote(src.Name), strconv.Quote(src.Namespace))
		return held(cs, SourceNotFound, why, cond), nil
	}
	if err != nil {
		return Decision{}, err
	}
	nss, err := w.Namespaces(query)
	if err != nil {
		return Decision{}, err
	}
	targets := map[string]bool{}
	for _, n := range nss {
		if !n.terminating() && n.Metadata.Name != "" && n.Metadata.Name != src.Namespace {
			targets[n.Metadata.Name] = true
		}
	}
	sorted := make([]string, 0, len(targets))
	for ns := range targets {
		sorted = append(sorted, ns)
	}
	sort.Strings(sorted)
	owned := map[CopyRef]bool{}
	for _, c := range w.Owned {
		owned[c] = true
	}
	var d Decision
	wanted := map[CopyRef]bool{}
	var conflicts []string
	for _, ns := range sorted {
		c := CopyRef{kind, ns, src.Name}
		if !owned[c] && w.Exists(kind, ns, src.Name) {
			conflicts = append(conflicts, ns)
			continue
		}
		d.Apply = append(d.Apply, intent(c, src, source))
		wanted[c] = true
	}
	for _, c := range w.Owned {
		if !wanted[c] && !(c.Kind == kind && c.Namespace == src.Namespace && c.Name == src.Name) {
			d.Delete = append(d.Delete, c)
		}
	}
	synced := uint32(len(d.Apply))
	copied := "copied to " + namespaces(synced)
	d.Events = append(conflictEvents(kind, src.Name, cs.Name, conflicts), guest.Normal(Synced, "ConfigSync synced to "+namespaces(synced)))
	ready := cond(Ready, guest.ConditionTrue, Synced, copied)
	if len(conflicts) > 0 {
		hold := "1 namespace holds"
		if len(conflicts) > 1 {
			hold = fmt.Sprintf("%d namespaces hold", len(conflicts))
		}
		ready = cond(Ready, guest.ConditionFalse, Conflict, fmt.Sprintf("%s; %s a %s %s not managed by this ConfigSync: %s",
			copied, hold, kind, strconv.Quote(src.Name), firstFew(conflicts)))
	}
	d.Status = previous(cs)
	gen := cs.Generation
	d.Status.ObservedGeneration, d.Status.Synced, d.Status.Conflicts = &gen, synced, conflicts
	guest.SetStatusCondition(&d.Status.Conditions, ready)
	return d, nil
}

// cleanup is a deletion of every copy the ConfigSync owns, and the Cleaned event.
func cleanup(owned []CopyRef) ([]CopyRef, guest.Event) {
	noun := "copies"
	if len(owned) == 1 {
		noun = "copy"
	}
	return owned, guest.Normal(Cleaned, fmt.Sprintf("deleted %d %s", len(owned), noun))
}

// intent is the copy of source in c.Namespace: name, namespace, the source annotation, and the
// source's data, binaryData and (a Secret's) type, as they are.
func intent(c CopyRef, src SourceRef, source *Source) map[string]any {
	o := map[string]any{
		"apiVersion": "v1",
		"kind":       string(c.Kind),
		"metadata": map[string]any{
			"name": c.Name, "namespace": c.Namespace,
			"annotations": map[string]string{SourceAnnotation: src.Namespace + "/" + src.Name},
		},
	}
	put := func(field string, v json.RawMessage) {
		if len(v) > 0 && string(v) != "null" {
			o[field] = v
		}
	}
	put("data", source.Data)
	put("binaryData", source.BinaryData)
	if c.Kind == Secret {
		put("type", source.Type)
	}
	return o
}

// held keeps everything but the Ready condition (False, reason) and the observed generation,
// with a Warning saying the same: nothing is applied or deleted.
func held(cs *ConfigSync, reason, message string, cond func(string, guest.ConditionStatus, string, string) guest.Condition) Decision {
	status := previous(cs)
	gen := cs.Generation
	status.ObservedGeneration = &gen
	guest.SetStatusCondition(&status.Conditions, cond(Ready, guest.ConditionFalse, reason, message))
	return Decision{Status: status, Events: []guest.Event{guest.Warning(reason, message)}}
}

func previous(cs *ConfigSync) ConfigSyncStatus {
	if cs.Status == nil {
		return ConfigSyncStatus{}
	}
	s := *cs.Status
	s.Conditions = append([]guest.Condition(nil), s.Conditions...)
	return s
}

func checkSource(src SourceRef) (Kind, string) {
	kind, ok := parseKind(src.Kind)
	if !ok {
		return "", fmt.Sprintf("spec.source.kind %s is not supported: it must be ConfigMap or Secret", strconv.Quote(src.Kind))
	}
	if !isDNSLabel(src.Namespace) {
		return "", fmt.Sprintf("spec.source.namespace %s is not a valid namespace name", strconv.Quote(src.Namespace))
	}
	if !isDNSSubdomain(src.Name) {
		return "", fmt.Sprintf("spec.source.name %s is not a valid %s name", strconv.Quote(src.Name), kind)
	}
	return kind, ""
}

func conflictEvents(kind Kind, name, syncName string, conflicts []string) []guest.Event {
	var events []guest.Event
	for i, ns := range conflicts {
		if i == MaxConflictEvents {
			break
		}
		events = append(events, guest.Warning(ErrResourceExists, fmt.Sprintf("%s %s in namespace %s already exists and is not managed by ConfigSync %s",
			kind, strconv.Quote(name), strconv.Quote(ns), strconv.Quote(syncName))))
	}
	if rest := len(conflicts) - MaxConflictEvents; rest > 0 {
		noun := "namespaces"
		if rest == 1 {
			noun = "namespace"
		}
		events = append(events, guest.Warning(ErrResourceExists, fmt.Sprintf("%s %s also exists and is not managed by ConfigSync %s in %d more %s (see status.conflicts)",
			kind, strconv.Quote(name), strconv.Quote(syncName), rest, noun)))
	}
	return events
}

func namespaces(n uint32) string {
	if n == 1 {
		return "1 namespace"
	}
	return fmt.Sprintf("%d namespaces", n)
}

func firstFew(names []string) string {
	shown := names
	if len(shown) > namedInMessage {
		shown = shown[:namedInMessage]
	}
	s := strings.Join(shown, ", ")
	if more := len(names) - namedInMessage; more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
