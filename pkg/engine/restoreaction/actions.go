package restoreaction

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// lastAppliedAnnotation is kubectl apply's record of what the user wrote.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Service clears what the target cluster allocates: the cluster IPs (a
// headless Service keeps "None") and, unless the restore preserves them
// (spec.preserveNodePorts) or the user wrote them (kubectl's
// last-applied-configuration), the node ports and the health check node
// port. Restored as they were, kube-apiserver refuses them as already
// allocated (Velero's service action).
type Service struct{}

func (Service) Name() string        { return "service: cluster IPs and node ports" }
func (Service) AppliesTo() []string { return []string{"services"} }

func (Service) Execute(in Input) (Result, error) {
	obj := in.Item.Object
	if ip, _, _ := unstructured.NestedString(obj, "spec", "clusterIP"); ip != "None" {
		unstructured.RemoveNestedField(obj, "spec", "clusterIP")
		unstructured.RemoveNestedField(obj, "spec", "clusterIPs")
	}
	if p := in.Restore.Spec.PreserveNodePorts; p != nil && *p {
		return Result{}, nil
	}
	explicit := explicitNodePorts(in.Item)
	ports, found, err := unstructured.NestedSlice(obj, "spec", "ports")
	if err != nil {
		return Result{}, fmt.Errorf("reading spec.ports: %w", err)
	}
	if found {
		for _, p := range ports {
			port, ok := p.(map[string]any)
			if !ok {
				continue
			}
			if np, ok := port["nodePort"]; ok && !explicit[fmt.Sprint(np)] {
				delete(port, "nodePort")
			}
		}
		if err := unstructured.SetNestedSlice(obj, ports, "spec", "ports"); err != nil {
			return Result{}, err
		}
	}
	if hc, ok, _ := unstructured.NestedFieldNoCopy(obj, "spec", "healthCheckNodePort"); ok && !explicit[fmt.Sprint(hc)] {
		unstructured.RemoveNestedField(obj, "spec", "healthCheckNodePort")
	}
	return Result{}, nil
}

// explicitNodePorts are the node ports in kubectl's record of what the
// user applied.
func explicitNodePorts(obj *unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	applied := obj.GetAnnotations()[lastAppliedAnnotation]
	if applied == "" {
		return out
	}
	var svc struct {
		Spec struct {
			Ports []struct {
				NodePort json.Number `json:"nodePort"`
			} `json:"ports"`
			HealthCheckNodePort json.Number `json:"healthCheckNodePort"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(applied), &svc); err != nil {
		return out
	}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != "" {
			out[p.NodePort.String()] = true
		}
	}
	if svc.Spec.HealthCheckNodePort != "" {
		out[svc.Spec.HealthCheckNodePort.String()] = true
	}
	return out
}

// controller returns the controller owner reference of the item as backed
// up ("" when none).
func controller(obj *unstructured.Unstructured) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return ref.Kind + "/" + ref.Name
		}
	}
	return ""
}

// ControlledByOwner skips pods, ReplicaSets and ControllerRevisions a
// controller owns: the restored Deployment, ReplicaSet, Job, StatefulSet
// or DaemonSet creates them again, and a restored copy would be an orphan
// beside them.
type ControlledByOwner struct{}

func (ControlledByOwner) Name() string { return "controlled: left to their controller" }
func (ControlledByOwner) AppliesTo() []string {
	return []string{"pods", "replicasets.apps", "controllerrevisions.apps"}
}

func (ControlledByOwner) Execute(in Input) (Result, error) {
	if owner := controller(in.FromBackup); owner != "" {
		return Result{Skip: true, Reason: "controlled by " + owner + ", which recreates it"}, nil
	}
	return Result{}, nil
}

// Pod clears what the scheduler and the service account admission assign:
// the node, and the projected service account token volume with its mounts
// (the admission adds a new one); a pod's priority follows its
// priorityClassName again.
type Pod struct{}

func (Pod) Name() string        { return "pod: node and token volume" }
func (Pod) AppliesTo() []string { return []string{"pods"} }

func (Pod) Execute(in Input) (Result, error) {
	obj := in.Item.Object
	unstructured.RemoveNestedField(obj, "spec", "nodeName")
	unstructured.RemoveNestedField(obj, "spec", "priority")
	volumes, _, _ := unstructured.NestedSlice(obj, "spec", "volumes")
	tokenVolumes := map[string]bool{}
	var kept []any
	for _, v := range volumes {
		vol, _ := v.(map[string]any)
		if name, _ := vol["name"].(string); strings.HasPrefix(name, "kube-api-access-") {
			tokenVolumes[name] = true
			continue
		}
		kept = append(kept, v)
	}
	if len(tokenVolumes) == 0 {
		return Result{}, nil
	}
	if err := setOrRemove(obj, kept, "spec", "volumes"); err != nil {
		return Result{}, err
	}
	for _, field := range []string{"containers", "initContainers"} {
		containers, _, _ := unstructured.NestedSlice(obj, "spec", field)
		for _, c := range containers {
			container, _ := c.(map[string]any)
			mounts, _ := container["volumeMounts"].([]any)
			var keptMounts []any
			for _, m := range mounts {
				mount, _ := m.(map[string]any)
				if name, _ := mount["name"].(string); !tokenVolumes[name] {
					keptMounts = append(keptMounts, m)
				}
			}
			if len(keptMounts) == 0 {
				delete(container, "volumeMounts")
			} else {
				container["volumeMounts"] = keptMounts
			}
		}
		if len(containers) > 0 {
			if err := unstructured.SetNestedSlice(obj, containers, "spec", field); err != nil {
				return Result{}, err
			}
		}
	}
	return Result{}, nil
}

func setOrRemove(obj map[string]any, list []any, fields ...string) error {
	if len(list) == 0 {
		unstructured.RemoveNestedField(obj, fields...)
		return nil
	}
	return unstructured.SetNestedSlice(obj, list, fields...)
}

// jobControllerLabels are the labels the Job controller puts on a Job's
// selector and pod template, naming the Job's UID: a restored Job gets a
// new UID, and kube-apiserver refuses a selector naming another.
var jobControllerLabels = []string{"controller-uid", "batch.kubernetes.io/controller-uid"}

// Job removes the generated selector and the controller-uid labels of its
// template (Velero's job action); the Job gets them anew.
type Job struct{}

func (Job) Name() string        { return "job: generated selector" }
func (Job) AppliesTo() []string { return []string{"jobs.batch"} }

func (Job) Execute(in Input) (Result, error) {
	obj := in.Item.Object
	if manual, _, _ := unstructured.NestedBool(obj, "spec", "manualSelector"); manual {
		return Result{}, nil
	}
	unstructured.RemoveNestedField(obj, "spec", "selector")
	labels, _, _ := unstructured.NestedStringMap(obj, "spec", "template", "metadata", "labels")
	for _, l := range jobControllerLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(obj, "spec", "template", "metadata", "labels")
		return Result{}, nil
	}
	return Result{}, unstructured.SetNestedStringMap(obj, labels, "spec", "template", "metadata", "labels")
}

// ServiceAccount drops the references to its legacy token Secrets (named
// <account>-token-...): the token controller makes new ones (Velero's
// service account action).
type ServiceAccount struct{}

func (ServiceAccount) Name() string        { return "serviceaccount: token secrets" }
func (ServiceAccount) AppliesTo() []string { return []string{"serviceaccounts"} }

func (ServiceAccount) Execute(in Input) (Result, error) {
	obj := in.Item.Object
	secrets, found, _ := unstructured.NestedSlice(obj, "secrets")
	if !found {
		return Result{}, nil
	}
	prefix := in.Item.GetName() + "-token-"
	var kept []any
	for _, s := range secrets {
		ref, _ := s.(map[string]any)
		if name, _ := ref["name"].(string); strings.HasPrefix(name, prefix) {
			continue
		}
		kept = append(kept, s)
	}
	return Result{}, setOrRemove(obj, kept, "secrets")
}

// ServiceAccountToken skips Secrets of type
// kubernetes.io/service-account-token: they hold a token signed for the
// account's old UID, and the token controller issues new ones.
type ServiceAccountToken struct{}

func (ServiceAccountToken) Name() string        { return "secret: service account tokens" }
func (ServiceAccountToken) AppliesTo() []string { return []string{"secrets"} }

func (ServiceAccountToken) Execute(in Input) (Result, error) {
	if t, _, _ := unstructured.NestedString(in.Item.Object, "type"); t == "kubernetes.io/service-account-token" {
		return Result{Skip: true, Reason: "a service account token: the cluster issues a new one"}, nil
	}
	return Result{}, nil
}

// BindingSubjects maps the namespace of ServiceAccount subjects of
// RoleBindings and ClusterRoleBindings through namespaceMapping, so that a
// namespace restored under another name keeps its accounts' rights.
type BindingSubjects struct{}

func (BindingSubjects) Name() string { return "binding subjects: namespaceMapping" }
func (BindingSubjects) AppliesTo() []string {
	return []string{"rolebindings.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io"}
}

func (BindingSubjects) Execute(in Input) (Result, error) {
	if len(in.Restore.Spec.NamespaceMapping) == 0 {
		return Result{}, nil
	}
	obj := in.Item.Object
	subjects, found, _ := unstructured.NestedSlice(obj, "subjects")
	if !found {
		return Result{}, nil
	}
	for _, s := range subjects {
		subject, _ := s.(map[string]any)
		if ns, _ := subject["namespace"].(string); ns != "" && subject["kind"] == "ServiceAccount" {
			subject["namespace"] = MapNamespace(in.Restore, ns)
		}
	}
	return Result{}, unstructured.SetNestedSlice(obj, subjects, "subjects")
}

// claimBindingAnnotations are what the PV controller and the scheduler
// record on a bound claim; the restored claim is bound anew.
var claimBindingAnnotations = []string{
	"pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller",
	"volume.kubernetes.io/selected-node", "volume.beta.kubernetes.io/storage-provisioner", "volume.kubernetes.io/storage-provisioner",
}

// PersistentVolumeClaim removes the binding annotations (Velero's PVC
// action); spec.volumeName stays, so that the claim binds to its restored
// volume again.
type PersistentVolumeClaim struct{}

func (PersistentVolumeClaim) Name() string        { return "persistentvolumeclaim: binding annotations" }
func (PersistentVolumeClaim) AppliesTo() []string { return []string{"persistentvolumeclaims"} }

func (PersistentVolumeClaim) Execute(in Input) (Result, error) {
	annotations := in.Item.GetAnnotations()
	for _, a := range claimBindingAnnotations {
		delete(annotations, a)
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	in.Item.SetAnnotations(annotations)
	return Result{}, nil
}

// PersistentVolume keeps the volume's claim reference by name, in the
// claim's namespace as mapped, without the old claim's UID and version, so
// that the restored claim binds to it (Velero's PV restore).
type PersistentVolume struct{}

func (PersistentVolume) Name() string        { return "persistentvolume: claim reference" }
func (PersistentVolume) AppliesTo() []string { return []string{"persistentvolumes"} }

func (PersistentVolume) Execute(in Input) (Result, error) {
	obj := in.Item.Object
	ref, found, _ := unstructured.NestedMap(obj, "spec", "claimRef")
	if !found {
		return Result{}, nil
	}
	delete(ref, "uid")
	delete(ref, "resourceVersion")
	if ns, _ := ref["namespace"].(string); ns != "" {
		ref["namespace"] = MapNamespace(in.Restore, ns)
	}
	unstructured.RemoveNestedField(obj, "metadata", "annotations", "pv.kubernetes.io/bound-by-controller")
	return Result{}, unstructured.SetNestedMap(obj, ref, "spec", "claimRef")
}

// ManagedEndpoints skips the Endpoints and EndpointSlices the cluster's
// controllers keep for Services with a selector: they make them again for
// the restored Service. Hand-made ones (no managed-by label) are restored.
type ManagedEndpoints struct{}

func (ManagedEndpoints) Name() string { return "endpoints: managed by a controller" }
func (ManagedEndpoints) AppliesTo() []string {
	return []string{"endpoints", "endpointslices.discovery.k8s.io"}
}

func (ManagedEndpoints) Execute(in Input) (Result, error) {
	labels := in.FromBackup.GetLabels()
	for _, l := range []string{"endpointslice.kubernetes.io/managed-by", "endpoints.kubernetes.io/managed-by"} {
		if by := labels[l]; by != "" {
			return Result{Skip: true, Reason: "kept by " + by + " for its Service"}, nil
		}
	}
	return Result{}, nil
}
