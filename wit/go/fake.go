package guest

import (
	"encoding/json"
	"fmt"
	"time"
)

// FakeCache is a Cache over objects given in a test, for running a reconciler natively (Run).
// It answers as the host does: by apiVersion, kind, namespace and name, and label selectors in
// the host's syntax.
type FakeCache struct {
	// Namespace is what an empty namespace means for namespaced kinds (the primary's; Run sets it
	// when it is empty).
	Namespace string
	// Now is the instant the calls see (Context.Now, AdmissionRequest.Now); zero: the wall clock.
	Now     time.Time
	objects []fakeObject
}

func (c *FakeCache) now() time.Time {
	if c.Now.IsZero() {
		return time.Now().UTC()
	}
	return c.Now
}

type fakeObject struct {
	text string
	meta struct {
		TypeMeta
		Metadata ObjectMeta `json:"metadata"`
	}
}

// NewFakeCache holds objects: JSON text (string or []byte) or anything encoding/json writes as a
// Kubernetes object (with apiVersion, kind and metadata.name). A bad object panics: it is a test
// mistake.
func NewFakeCache(objects ...any) *FakeCache {
	c := &FakeCache{}
	for _, o := range objects {
		c.Add(o)
	}
	return c
}

// Add adds one object (as NewFakeCache).
func (c *FakeCache) Add(object any) {
	text, err := jsonText(object)
	if err != nil {
		panic(fmt.Sprintf("guest.FakeCache: %v", err))
	}
	var o fakeObject
	o.text = text
	if err := json.Unmarshal([]byte(text), &o.meta); err != nil || o.meta.Kind == "" || o.meta.Metadata.Name == "" {
		panic(fmt.Sprintf("guest.FakeCache: not a Kubernetes object with apiVersion, kind and metadata.name: %.200s", text))
	}
	c.objects = append(c.objects, o)
}

func (c *FakeCache) matches(o *fakeObject, gvk GVK, namespace string) bool {
	if o.meta.APIVersion != gvk.APIVersion() || o.meta.Kind != gvk.Kind {
		return false
	}
	ns := o.meta.Metadata.Namespace
	if namespace == "" {
		return ns == "" || ns == c.Namespace
	}
	return ns == namespace
}

// Get implements Cache.
func (c *FakeCache) Get(gvk GVK, namespace, name string) (string, bool) {
	for i := range c.objects {
		if o := &c.objects[i]; c.matches(o, gvk, namespace) && o.meta.Metadata.Name == name {
			return o.text, true
		}
	}
	return "", false
}

// Query implements Cache. An empty namespace lists every namespace, as the host does.
func (c *FakeCache) Query(gvk GVK, namespace, labelSelector string) []string {
	sel, err := parseSelector(labelSelector)
	if err != nil {
		return nil
	}
	var out []string
	for i := range c.objects {
		o := &c.objects[i]
		if o.meta.APIVersion != gvk.APIVersion() || o.meta.Kind != gvk.Kind {
			continue
		}
		if namespace != "" && o.meta.Metadata.Namespace != namespace {
			continue
		}
		if sel.matches(o.meta.Metadata.Labels) {
			out = append(out, o.text)
		}
	}
	return out
}

// Result is what the host gets from one reconcile run by Run.
type Result struct {
	// Apply holds the intents (JSON objects).
	Apply []json.RawMessage
	// Delete holds the objects to delete.
	Delete []ObjectRef
	// Status is the new status, nil to leave it alone.
	Status json.RawMessage
	// Events holds the events to record (also those of a Failure).
	Events []Event
	// RequeueAfter is nil unless the reconcile asked to run again.
	RequeueAfter *time.Duration
	// Failure is set when the reconcile failed (then Apply, Delete and Status are empty).
	Failure *Failure
	// Log holds the lines the reconcile logged.
	Log []LogLine
}

// LogLine is one line logged by a reconcile.
type LogLine struct {
	Level   LogLevel
	Message string
}

// Run calls r.Reconcile natively, the way the host calls the component: primary (JSON text or
// a Go object) is decoded into P, the owned objects are those of cache whose kind is in
// r.Info().Owns, in the primary's namespace, controlled by the primary's UID (and, for
// OwnsAcrossNamespaces, those labelled kwop.dev/owner-uid=<UID>, in any namespace); what the
// reconcile returns goes through the same checks as in the component. A nil cache is an empty
// one. Context.Now is the wall clock (set the cache's Now to fix it).
func Run[P any](r Reconciler[P], primary any, cache *FakeCache) Result {
	text, cache, owned := prepare(r, "guest.Run", primary, cache)
	var res Result
	defer capture(&res.Log)()
	w, f := run(r, text, owned, cache.now(), cache)
	if f != nil {
		res.Failure, res.Events = f, f.Events
		return res
	}
	res.fill(w)
	return res
}

func (res *Result) fill(w wireOutcome) {
	for _, a := range w.apply {
		res.Apply = append(res.Apply, json.RawMessage(a))
	}
	res.Delete, res.Events = w.deletes, w.events
	if w.status != nil {
		res.Status = json.RawMessage(*w.status)
	}
	if w.requeue != nil {
		d := time.Duration(*w.requeue) * time.Millisecond
		res.RequeueAfter = &d
	}
}

// prepare is the primary's text, the cache (with its namespace set) and the owned objects, as
// the host would send them.
func prepare[P any](r Reconciler[P], caller string, primary any, cache *FakeCache) (string, *FakeCache, []string) {
	text, err := jsonText(primary)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", caller, err))
	}
	var pm struct {
		Metadata ObjectMeta `json:"metadata"`
	}
	_ = json.Unmarshal([]byte(text), &pm)
	if cache == nil {
		cache = NewFakeCache()
	}
	if cache.Namespace == "" {
		cache.Namespace = pm.Metadata.Namespace
	}
	uid := pm.Metadata.UID
	var owned []string
	info := r.Info()
	for _, gvk := range info.Owns {
		for i := range cache.objects {
			o := &cache.objects[i]
			ref := GetControllerOf(&o.meta.Metadata)
			if cache.matches(o, gvk, pm.Metadata.Namespace) && o.meta.Metadata.Namespace == pm.Metadata.Namespace &&
				uid != "" && ref != nil && ref.UID == uid {
				owned = append(owned, o.text)
			}
		}
	}
	for _, gvk := range info.OwnsAcrossNamespaces {
		for i := range cache.objects {
			o := &cache.objects[i]
			if o.meta.APIVersion == gvk.APIVersion() && o.meta.Kind == gvk.Kind && uid != "" &&
				o.meta.Metadata.Labels["kwop.dev/owner-uid"] == uid {
				owned = append(owned, o.text)
			}
		}
	}
	return text, cache, owned
}

// capture sends the log to lines until the returned function is called.
func capture(lines *[]LogLine) func() {
	saved := logSink
	logSink = func(level LogLevel, message string) { *lines = append(*lines, LogLine{level, message}) }
	return func() { logSink = saved }
}

func jsonText(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case []byte:
		return string(t), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("cannot serialise %T: %w", v, err)
	}
	return string(b), nil
}
