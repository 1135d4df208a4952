// config-sync in Go: one ConfigMap or Secret, copied into every namespace a label selector picks
// (the Rust example in ../src, the same behaviour and fixtures). The decisions are in sync.go;
// this file is the plugin around them. Build: ./build.sh (wit/go/build.sh).

package main

import (
	"kwop.dev/guest"
)

var namespaceGVK = guest.GVK{Version: "v1", Kind: "Namespace"}

// ConfigSyncPlugin is the plugin.
type ConfigSyncPlugin struct{}

// Info: ConfigSyncs; ConfigMaps and Secrets owned across namespaces (tracked by the host's
// labels, deleted by Finalize); Namespaces read.
func (ConfigSyncPlugin) Info() guest.Info {
	return guest.Info{
		Name:                 "config-sync",
		Version:              "0.1.0",
		Primary:              guest.GVK{Group: "examples.kwop.dev", Version: "v1alpha1", Kind: "ConfigSync"},
		OwnsAcrossNamespaces: []guest.GVK{ConfigMap.GVK(), Secret.GVK()},
		Reads:                []guest.GVK{namespaceGVK},
		Finalizes:            true,
	}
}

// Reconcile keeps the copies in line with the source and the selected namespaces.
func (ConfigSyncPlugin) Reconcile(cs *ConfigSync, ctx *guest.Context) (*guest.Outcome, error) {
	w := World{
		Source: func(kind Kind, ns, name string) (*Source, error) {
			return guest.NewLister[Source](ctx, kind.GVK()).Get(ns, name)
		},
		Namespaces: func(selector string) ([]*Namespace, error) {
			return guest.NewLister[Namespace](ctx, namespaceGVK).List("", selector)
		},
		Exists: func(kind Kind, ns, name string) bool {
			_, found := ctx.Cache.Get(kind.GVK(), ns, name)
			return found
		},
		Owned: copiesOf(ctx.OwnedJSON()),
	}
	d, err := decide(cs, w, ctx.Condition)
	if err != nil {
		return nil, err
	}
	// Counts only: no data, not even a key, reaches the log.
	guest.Debugf("%d copies applied, %d deleted, %d conflicts", len(d.Apply), len(d.Delete), len(d.Status.Conflicts))
	out := guest.NewOutcome().Status(d.Status)
	for _, a := range d.Apply {
		out.Apply(a)
	}
	for _, c := range d.Delete {
		out.Delete(c.Kind.GVK(), c.Namespace, c.Name)
	}
	for _, e := range d.Events {
		out.Event(e)
	}
	return out, nil
}

// Finalize deletes every copy the ConfigSync owns, and is done.
func (ConfigSyncPlugin) Finalize(cs *ConfigSync, ctx *guest.Context) (*guest.FinalizeOutcome, error) {
	deletes, event := cleanup(copiesOf(ctx.OwnedJSON()))
	f := guest.Done().Event(event)
	for _, c := range deletes {
		f.Delete(c.Kind.GVK(), c.Namespace, c.Name)
	}
	return f, nil
}

func init() { guest.Export[ConfigSync](ConfigSyncPlugin{}) }

// main never runs: the host calls the exports of the component.
func main() {}
