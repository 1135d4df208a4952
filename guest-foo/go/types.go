// The objects guest-foo reads and writes, as narrow structs with the JSON names of their
// Kubernetes types: only the fields the logic uses (see README.md for why not k8s.io/api).

package main

import "kwop.dev/guest"

// Foo is the Foo custom resource (samplecontroller.k8s.io/v1alpha1).
type Foo struct {
	guest.TypeMeta   `json:",inline"`
	guest.ObjectMeta `json:"metadata"`

	Spec   FooSpec   `json:"spec"`
	Status FooStatus `json:"status"`
}

// FooSpec is the spec of a Foo.
type FooSpec struct {
	DeploymentName string `json:"deploymentName"`
	// Replicas is optional (the CRD allows 1..10; unset leaves the Deployment's default).
	Replicas *int32 `json:"replicas"`
}

// FooStatus is the status of a Foo.
type FooStatus struct {
	AvailableReplicas int32 `json:"availableReplicas"`
}

// Deployment is the part of appsv1.Deployment guest-foo reads and writes. Empty fields are
// not written, so it also serves as the server-side apply intent.
type Deployment struct {
	guest.TypeMeta   `json:",inline"`
	guest.ObjectMeta `json:"metadata"`

	Spec   DeploymentSpec    `json:"spec"`
	Status *DeploymentStatus `json:"status,omitempty"`
}

// DeploymentSpec is the part of appsv1.DeploymentSpec guest-foo sets.
type DeploymentSpec struct {
	Replicas *int32          `json:"replicas,omitempty"`
	Selector *LabelSelector  `json:"selector,omitempty"`
	Template PodTemplateSpec `json:"template"`
}

// LabelSelector is metav1.LabelSelector's matchLabels.
type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// PodTemplateSpec is corev1.PodTemplateSpec.
type PodTemplateSpec struct {
	ObjectMeta guest.ObjectMeta `json:"metadata"`
	Spec       PodSpec          `json:"spec"`
}

// PodSpec is the part of corev1.PodSpec guest-foo sets.
type PodSpec struct {
	Containers []Container `json:"containers"`
}

// Container is the part of corev1.Container guest-foo sets.
type Container struct {
	Name  string `json:"name"`
	Image string `json:"image,omitempty"`
}

// DeploymentStatus is the part of appsv1.DeploymentStatus guest-foo reads.
type DeploymentStatus struct {
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
}
