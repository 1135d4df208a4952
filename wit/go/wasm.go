//go:build wasip1

package guest

import (
	"os"
	"strings"
	"time"

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
	export_wit_world.FinalizeFunc = finalizeExport
	export_wit_world.ValidateFunc = validateExport
}

func reconcileExport(req wit.Request) export_wit_world.Result {
	w, f := exported.reconcile(req.Primary, req.Owned, instant(req.Now), hostCache{})
	// Everything the host passed in (the request, cache answers) was decoded into Go values:
	// the memory it came in can serve the next call, if the host makes one on this instance.
	witRuntime.ResetArena()
	if f != nil {
		return witTypes.Err[wit.Outcome, wit.Failure](witFailure(f))
	}
	o := wit.Outcome{Apply: w.apply, Events: witEvents(w.events), Delete: witDeletes(w.deletes),
		Status: optionPtr(w.status), RequeueAfterMs: witTypes.None[uint64]()}
	if w.requeue != nil {
		o.RequeueAfterMs = witTypes.Some(*w.requeue)
	}
	return witTypes.Ok[wit.Outcome, wit.Failure](o)
}

func finalizeExport(req wit.Request) export_wit_world.FinalizeResult {
	w, done, f := exported.finalize(req.Primary, req.Owned, instant(req.Now), hostCache{})
	witRuntime.ResetArena()
	if f != nil {
		return witTypes.Err[wit.FinalizeOutcome, wit.Failure](witFailure(f))
	}
	o := wit.FinalizeOutcome{Delete: witDeletes(w.deletes), Status: optionPtr(w.status), Events: witEvents(w.events),
		Done: done, RequeueAfterMs: witTypes.None[uint64]()}
	if w.requeue != nil {
		o.RequeueAfterMs = witTypes.Some(*w.requeue)
	}
	return witTypes.Ok[wit.FinalizeOutcome, wit.Failure](o)
}

func validateExport(req wit.AdmissionRequest) export_wit_world.ValidateResult {
	in := admissionInput{op: Create, object: req.Object, user: req.User, dryRun: req.DryRun, now: instant(req.Now)}
	if req.Operation == wit.Operation_Update {
		in.op = Update
	}
	if req.OldObject.IsSome() {
		old := req.OldObject.Some()
		in.old = &old
	}
	warnings, violations, err := exported.validate(in, hostCache{})
	witRuntime.ResetArena()
	if err != nil {
		// Not a refusal: the call must fail, so that the webhook's failurePolicy applies. The
		// message goes to stderr, where the host reads it (as it reads a Rust panic's).
		fail(err.Message)
	}
	if violations != nil {
		out := make([]wit.Violation, 0, len(violations))
		for _, v := range violations {
			out = append(out, wit.Violation{Field: option(v.Field), Message: v.Message})
		}
		return witTypes.Err[[]string, []wit.Violation](out)
	}
	if warnings == nil {
		warnings = []string{}
	}
	return witTypes.Ok[[]string, []wit.Violation](warnings)
}

// fail ends the call with message on stderr ("panic: ..." as Go prints a panic, or
// "kwop.dev/guest: ..." for an error): the first line, the rest indented under it (the host keeps it as one record and shows it as the call's error), then a
// trap. Not a Go panic: Go's runtime sleeps before it prints one, and plugins cannot sleep.
func fail(message string) {
	lines := strings.Split(message, "\n")
	text := lines[0]
	for _, l := range lines[1:] {
		if l != "" {
			text += "\n\t" + l
		}
	}
	_, _ = os.Stderr.WriteString(text + "\n")
	os.Exit(2)
}

func instant(i wit.Instant) time.Time {
	return time.Unix(int64(i.Seconds), int64(i.Nanoseconds)).UTC()
}

func optionPtr(s *string) witTypes.Option[string] {
	if s == nil {
		return witTypes.None[string]()
	}
	return witTypes.Some(*s)
}

func witFailure(f *Failure) wit.Failure {
	return wit.Failure{Message: f.Message, Events: witEvents(f.Events), Retry: f.Retry}
}

func witDeletes(refs []ObjectRef) []wit.ObjectRef {
	out := make([]wit.ObjectRef, 0, len(refs))
	for _, d := range refs {
		out = append(out, wit.ObjectRef{Gvk: witGVK(d.GVK), Namespace: option(d.Namespace), Name: d.Name})
	}
	return out
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
	p := wit.PluginInfo{Name: i.Name, Version: i.Version, Primary: witGVK(i.Primary), Owns: []wit.OwnedKind{},
		Reads: []wit.Gvk{}, Finalizes: i.Finalizes, Validates: i.Validates}
	for _, g := range i.Owns {
		p.Owns = append(p.Owns, wit.OwnedKind{Kind: witGVK(g)})
	}
	for _, g := range i.OwnsAcrossNamespaces {
		p.Owns = append(p.Owns, wit.OwnedKind{Kind: witGVK(g), AcrossNamespaces: true})
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
