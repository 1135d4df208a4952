//go:build wasip1

package guest

import (
	"strings"

	"kwop.dev/guest/internal/bindings/export_wit_world"
	_ "kwop.dev/guest/internal/bindings/exports" // the world's exports (//go:wasmexport)
	"kwop.dev/guest/internal/bindings/kwop_reconciler_cache"
	"kwop.dev/guest/internal/bindings/kwop_reconciler_log"
	wit "kwop.dev/guest/internal/bindings/kwop_reconciler_types"
	witRuntime "kwop.dev/guest/internal/wit/runtime"
	witTypes "kwop.dev/guest/internal/wit/types"
)

// bind connects the exported reconciler, the cache and the log to the WIT bindings.
func bind() {
	// Export runs in an init function: the WASI adapter has taken its memory by now.
	witRuntime.MarkArena()
	logSink = func(level LogLevel, message string) { kwop_reconciler_log.Log(uint8(level), message) }
	export_wit_world.InfoFunc = func() wit.PluginInfo { return witInfo(exported.info()) }
	export_wit_world.ReconcileFunc = reconcileExport
}

func reconcileExport(req wit.Request) export_wit_world.Result {
	w, f := exported.reconcile(req.Primary, req.Owned, hostCache{})
	// Everything the host passed in (the request, cache answers) was decoded into Go values:
	// the memory it came in can serve the next call, if the host makes one on this instance.
	witRuntime.ResetArena()
	if f != nil {
		return witTypes.Err[wit.Outcome, wit.Failure](wit.Failure{Message: f.Message, Events: witEvents(f.Events), Retry: f.Retry})
	}
	o := wit.Outcome{Apply: w.apply, Events: witEvents(w.events), Status: witTypes.None[string](), RequeueAfterMs: witTypes.None[uint64]()}
	for _, d := range w.deletes {
		o.Delete = append(o.Delete, wit.ObjectRef{Gvk: witGVK(d.GVK), Namespace: option(d.Namespace), Name: d.Name})
	}
	if w.status != nil {
		o.Status = witTypes.Some(*w.status)
	}
	if w.requeue != nil {
		o.RequeueAfterMs = witTypes.Some(*w.requeue)
	}
	return witTypes.Ok[wit.Outcome, wit.Failure](o)
}

// hostCache is the `cache` import.
type hostCache struct{}

func (hostCache) Get(gvk GVK, namespace, name string) (string, bool) {
	r := kwop_reconciler_cache.Get(witGVK(gvk), option(namespace), name)
	if r.IsNone() {
		return "", false
	}
	// A copy: the text the host passed lives in memory reused after the call.
	return strings.Clone(r.Some()), true
}

func (hostCache) Query(gvk GVK, namespace, labelSelector string) []string {
	texts := kwop_reconciler_cache.Query(witGVK(gvk), option(namespace), option(labelSelector))
	for i := range texts {
		texts[i] = strings.Clone(texts[i])
	}
	return texts
}

func option(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

func witGVK(g GVK) wit.Gvk { return wit.Gvk{Group: g.Group, Version: g.Version, Kind: g.Kind} }

func witInfo(i Info) wit.PluginInfo {
	p := wit.PluginInfo{Name: i.Name, Version: i.Version, Primary: witGVK(i.Primary), Owns: []wit.Gvk{}, Reads: []wit.Gvk{}}
	for _, g := range i.Owns {
		p.Owns = append(p.Owns, witGVK(g))
	}
	for _, g := range i.Reads {
		p.Reads = append(p.Reads, witGVK(g))
	}
	return p
}

func witEvents(events []Event) []wit.Event {
	out := make([]wit.Event, 0, len(events))
	for _, e := range events {
		severity := wit.EventType_Normal
		if e.Type == EventTypeWarning {
			severity = wit.EventType_Warning
		}
		out = append(out, wit.Event{Severity: severity, Reason: e.Reason, Message: e.Message})
	}
	return out
}
