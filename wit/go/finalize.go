package guest

import (
	"fmt"
	"time"
)

// FinalizeOutcome is what Finalize decided for a primary being deleted, built by chaining:
//
//	return guest.Done().Delete(configMapGVK, ns, name).Event(guest.Normal("CleanedUp", "...")), nil
//	return guest.NotDone().RequeueAfter(10 * time.Second), nil
//
// Nothing is applied while a primary is being deleted: only deletions, the status and events.
type FinalizeOutcome struct {
	out  Outcome
	done bool
}

// Done: the cleanup is complete once these deletions are made; the host then removes its
// finalizer and the API server deletes the primary. Finalize is not called again.
func Done() *FinalizeOutcome { return &FinalizeOutcome{done: true} }

// NotDone: not yet; the host makes the deletions and calls Finalize again when an owned object
// changes, or after RequeueAfter (5 s when not given).
func NotDone() *FinalizeOutcome { return &FinalizeOutcome{} }

// Delete adds an object to delete (one that belongs to this primary; one already gone is fine).
func (f *FinalizeOutcome) Delete(gvk GVK, namespace, name string) *FinalizeOutcome {
	f.out.Delete(gvk, namespace, name)
	return f
}

// Status sets the primary's new status, as Outcome.Status.
func (f *FinalizeOutcome) Status(status any) *FinalizeOutcome {
	f.out.Status(status)
	return f
}

// Event adds an event to record on the primary.
func (f *FinalizeOutcome) Event(e Event) *FinalizeOutcome {
	f.out.Event(e)
	return f
}

// RequeueAfter, with NotDone, calls Finalize again after d even if nothing changes.
func (f *FinalizeOutcome) RequeueAfter(d time.Duration) *FinalizeOutcome {
	f.out.RequeueAfter(d)
	return f
}

// IsDone reports whether the outcome lets the primary go.
func (f *FinalizeOutcome) IsDone() bool { return f.done }

// runFinalize is one finalize, the same natively and in the component. A reconciler that is not
// a Finalizer is done at once.
func runFinalize[P any](r Reconciler[P], primary string, owned []string, now time.Time, cache Cache) (wireOutcome, bool, *Failure) {
	fin, ok := r.(Finalizer[P])
	if !ok {
		return wireOutcome{}, true, nil
	}
	var p P
	if err := decode(primary, &p); err != nil {
		return wireOutcome{}, false, Permanent(fmt.Sprintf("the primary object does not parse: %v", err))
	}
	ctx := newContext(primary, owned, now, cache)
	var out *FinalizeOutcome
	var err error
	if pan := catch(func() { out, err = fin.Finalize(&p, ctx) }); pan != nil {
		return wireOutcome{}, false, pan.failure(ctx.Recorder.events)
	}
	if err != nil {
		f := asFailure(err)
		f.Events = append(ctx.Recorder.events, f.Events...)
		return wireOutcome{}, false, f
	}
	if out == nil {
		out = Done()
	}
	w, err := out.out.wire()
	if err != nil {
		return wireOutcome{}, false, Permanent(err.Error())
	}
	w.events = append(ctx.Recorder.events, w.events...)
	if err := checkEvents(w.events); err != nil {
		return wireOutcome{}, false, Permanent(err.Error())
	}
	return w, out.done, nil
}
