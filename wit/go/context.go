package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Cache is the host's read-only view of the kinds the plugin declared (primary, owns, reads), as
// JSON text. In the component it is the `cache` import; in native tests, a FakeCache. An empty
// namespace means none: the primary's namespace for namespaced kinds, none for cluster-scoped
// ones. An empty selector matches everything.
type Cache interface {
	// Get returns one object, or false when the cache does not hold it.
	Get(gvk GVK, namespace, name string) (string, bool)
	// Query returns the objects of a kind in a namespace ("" for all) matching a label selector
	// in the usual syntax (app=nginx,tier in (web),!legacy); an invalid selector matches nothing.
	Query(gvk GVK, namespace, labelSelector string) []string
}

// Context is what a reconcile may look at besides its primary: the host's caches, the objects
// the primary controls, an event recorder and the host's log.
type Context struct {
	// Cache reads the host's caches. NewLister gives typed access.
	Cache Cache
	// Recorder collects events to record on the primary; they are returned with the outcome or
	// the failure, whichever the reconcile ends with.
	Recorder Recorder
	// Now is the call's instant (the request's `now`, UTC): what the clock reads during the call
	// and what a condition's lastTransitionTime says when its status changes.
	Now time.Time
	// Generation is the primary's metadata.generation (0 in an admission request for a new
	// object): the observedGeneration of what this call writes.
	Generation int64
	owned      []string
	primary    string
}

// Condition is a condition observed at this call: ObservedGeneration is the primary's
// generation. Put it in the status with SetStatusCondition (which keeps lastTransitionTime when
// the status did not change, else sets it to Now).
func (c *Context) Condition(conditionType string, status ConditionStatus, reason, message string) Condition {
	return Condition{Type: conditionType, Status: status, ObservedGeneration: c.Generation,
		LastTransitionTime: NewTime(c.Now), Reason: reason, Message: message}
}

// PrimaryJSON is the primary object as the host sent it.
func (c *Context) PrimaryJSON() []byte { return []byte(c.primary) }

// OwnedJSON is every object the primary controls (owned kinds, its namespace, controller
// reference to it), as the host sent them.
func (c *Context) OwnedJSON() [][]byte {
	out := make([][]byte, len(c.owned))
	for i, o := range c.owned {
		out[i] = []byte(o)
	}
	return out
}

// Owned decodes the objects of one kind that the primary controls into T (from the request: no
// cache call). An object that does not decode into T is an error.
func Owned[T any](c *Context, gvk GVK) ([]T, error) {
	var out []T
	for _, o := range c.owned {
		var tm TypeMeta
		if err := decode(o, &tm); err != nil {
			return nil, fmt.Errorf("an owned object is not a Kubernetes object: %w", err)
		}
		if tm.APIVersion != gvk.APIVersion() || tm.Kind != gvk.Kind {
			continue
		}
		var v T
		if err := decode(o, &v); err != nil {
			return nil, fmt.Errorf("an owned %s does not decode: %w", gvk.Kind, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Lister reads one kind from the host's cache into T, like a client-go lister: T can be a
// k8s.io/api type (appsv1.Deployment) or a narrow struct with only the fields you read.
type Lister[T any] struct {
	cache Cache
	gvk   GVK
}

// NewLister returns a lister of gvk decoding into T. The kind must be declared in Info (primary,
// owns or reads): the host answers nothing for other kinds.
func NewLister[T any](c *Context, gvk GVK) Lister[T] {
	return Lister[T]{cache: c.Cache, gvk: gvk}
}

// Get returns one object. An object the cache does not hold is an error for which IsNotFound is
// true; one that does not decode into T is another error.
func (l Lister[T]) Get(namespace, name string) (*T, error) {
	text, ok := l.cache.Get(l.gvk, namespace, name)
	if !ok {
		return nil, &NotFoundError{GVK: l.gvk, Namespace: namespace, Name: name}
	}
	v := new(T)
	if err := decode(text, v); err != nil {
		return nil, fmt.Errorf("cached %s %s does not decode: %w", l.gvk.Kind, qualified(namespace, name), err)
	}
	return v, nil
}

// List returns the objects in namespace ("" for all) matching labelSelector ("" for all).
func (l Lister[T]) List(namespace, labelSelector string) ([]*T, error) {
	texts := l.cache.Query(l.gvk, namespace, labelSelector)
	out := make([]*T, 0, len(texts))
	for _, text := range texts {
		v := new(T)
		if err := decode(text, v); err != nil {
			return nil, fmt.Errorf("a cached %s does not decode: %w", l.gvk.Kind, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// NotFoundError says the cache holds no such object.
type NotFoundError struct {
	GVK       GVK
	Namespace string
	Name      string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s %q not found", e.GVK.Kind, qualified(e.Namespace, e.Name))
}

// IsNotFound reports whether err (or an error it wraps) says an object is not in the cache, as
// k8s.io/apimachinery's errors.IsNotFound does for listers.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// decode reads JSON text into v without copying the text first: encoding/json copies every
// string it keeps, so nothing in v refers to the memory the host passed the text in (the
// component reuses that memory after the call).
func decode(text string, v any) error {
	return json.Unmarshal(unsafe.Slice(unsafe.StringData(text), len(text)), v)
}
