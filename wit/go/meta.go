package guest

// TypeMeta is apiVersion and kind, as metav1.TypeMeta. Embed it with `json:",inline"`.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// ObjectMeta is the part of metav1.ObjectMeta most plugins read, with the same JSON names.
// Embedded in a struct with the tag `json:"metadata"` it gives foo.Name, foo.Namespace, foo.UID...
// Fields left empty are not written, so it also serves in apply intents.
type ObjectMeta struct {
	Name            string            `json:"name,omitempty"`
	Namespace       string            `json:"namespace,omitempty"`
	UID             string            `json:"uid,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Generation      int64             `json:"generation,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	OwnerReferences []OwnerReference  `json:"ownerReferences,omitempty"`
	// DeletionTimestamp is set when the object is being deleted.
	DeletionTimestamp *Time `json:"deletionTimestamp,omitempty"`
}

// OwnerReference is metav1.OwnerReference. Plugins read them; the host sets the controller
// reference of what a plugin applies (intents must not carry any).
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// GetObjectMeta lets any struct that embeds ObjectMeta be used as an Object.
func (m *ObjectMeta) GetObjectMeta() *ObjectMeta { return m }

// Object is anything that embeds ObjectMeta.
type Object interface {
	GetObjectMeta() *ObjectMeta
}

// GetControllerOf returns the controller owner reference of obj, or nil (metav1.GetControllerOf).
func GetControllerOf(obj Object) *OwnerReference {
	refs := obj.GetObjectMeta().OwnerReferences
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

// IsControlledBy reports whether obj's controller owner reference points at owner's UID
// (metav1.IsControlledBy). An owner without a UID controls nothing.
func IsControlledBy(obj Object, owner Object) bool {
	ref := GetControllerOf(obj)
	uid := owner.GetObjectMeta().UID
	return ref != nil && uid != "" && ref.UID == uid
}
