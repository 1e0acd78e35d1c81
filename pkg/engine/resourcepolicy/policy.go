// Package resourcepolicy is Velero's resource policies (format version
// v1): the ConfigMap a backup's spec.resourcePolicy names holds, in its
// one data key, volume policies that decide per claim what a backup does
// with its volume's data: the first policy whose conditions all hold for
// the volume gives the action (skip, snapshot, fs-backup). Conditions are
// on the volume's capacity, storage class, NFS server and path, CSI driver
// and volume attributes, volume type, and the claim's labels and phase.
// Parse is strict (an unknown field is an error, as Velero's decoding is)
// and validates; the backup engine parses the policy when a backup starts
// and a bad one fails the backup's validation (FailedValidation).
package resourcepolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// Version is the format version this package reads.
const Version = "v1"

// ActionType is what a policy does with a volume.
type ActionType string

// Velero's action types.
const (
	// Skip: no data of the volume is backed up (its objects are).
	Skip ActionType = "skip"
	// Snapshot: a snapshot of the volume (a CSI snapshot here), even when
	// the backup's snapshotVolumes is false.
	Snapshot ActionType = "snapshot"
	// FSBackup: a file system backup of the volume (Velero's node agent);
	// not a snapshot.
	FSBackup ActionType = "fs-backup"
)

// Action is a policy's action.
type Action struct {
	Type       ActionType     `json:"type"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

// Policies are the parsed policies.
type Policies struct {
	volumes []volumePolicy
}

type volumePolicy struct {
	action     Action
	conditions conditions
}

// document is the ConfigMap's YAML.
type document struct {
	Version              string           `json:"version"`
	VolumePolicies       []policyDocument `json:"volumePolicies"`
	IncludeExcludePolicy json.RawMessage  `json:"includeExcludePolicy,omitempty"`
}

type policyDocument struct {
	Conditions json.RawMessage `json:"conditions"`
	Action     Action          `json:"action"`
}

// conditionsDocument are a policy's conditions, as written.
type conditionsDocument struct {
	Capacity     string            `json:"capacity,omitempty"`
	StorageClass []string          `json:"storageClass,omitempty"`
	NFS          *nfsCondition     `json:"nfs,omitempty"`
	CSI          *csiCondition     `json:"csi,omitempty"`
	VolumeTypes  []string          `json:"volumeTypes,omitempty"`
	PVCLabels    map[string]string `json:"pvcLabels,omitempty"`
	PVCPhase     []string          `json:"pvcPhase,omitempty"`
}

type nfsCondition struct {
	Server string `json:"server,omitempty"`
	Path   string `json:"path,omitempty"`
}

type csiCondition struct {
	Driver           string            `json:"driver,omitempty"`
	VolumeAttributes map[string]string `json:"volumeAttributes,omitempty"`
}

// conditions are a policy's conditions, checked.
type conditions struct {
	doc          conditionsDocument
	lower, upper *resource.Quantity
}

// FromConfigMap parses the policies of a ConfigMap, which holds them in
// its one data key.
func FromConfigMap(cm *corev1.ConfigMap) (*Policies, error) {
	if len(cm.Data) != 1 {
		return nil, fmt.Errorf("illegal resource policies %s/%s configmap: it has %d data keys, want one", cm.Namespace, cm.Name, len(cm.Data))
	}
	for _, data := range cm.Data {
		return Parse(data)
	}
	return nil, errors.New("unreachable")
}

// Parse parses and validates policies.
func Parse(data string) (*Policies, error) {
	var doc document
	if err := yaml.UnmarshalStrict([]byte(data), &doc); err != nil {
		return nil, fmt.Errorf("failed to decode yaml data into resource policies: %w", err)
	}
	if doc.Version != Version {
		return nil, fmt.Errorf("incompatible version number %s with supported version %s", doc.Version, Version)
	}
	if len(doc.IncludeExcludePolicy) > 0 && string(doc.IncludeExcludePolicy) != "null" {
		return nil, errors.New("includeExcludePolicy is not supported by this server: use the backup's resource filters")
	}
	p := &Policies{}
	for i, pd := range doc.VolumePolicies {
		vp := volumePolicy{action: pd.Action}
		switch pd.Action.Type {
		case Skip, Snapshot, FSBackup:
		default:
			return nil, fmt.Errorf("volumePolicies[%d]: invalid action type %s", i, pd.Action.Type)
		}
		if len(pd.Conditions) > 0 && string(pd.Conditions) != "null" {
			if err := yaml.UnmarshalStrict(pd.Conditions, &vp.conditions.doc); err != nil {
				return nil, fmt.Errorf("volumePolicies[%d]: failed to decode volume conditions: %w", i, err)
			}
		}
		if err := vp.conditions.check(); err != nil {
			return nil, fmt.Errorf("volumePolicies[%d]: %w", i, err)
		}
		p.volumes = append(p.volumes, vp)
	}
	return p, nil
}

// check validates conditions and parses the capacity range.
func (c *conditions) check() error {
	if r := strings.TrimSpace(c.doc.Capacity); r != "" {
		parts := strings.Split(r, ",")
		if len(parts) != 2 {
			return fmt.Errorf("wrong format of Capacity %s", r)
		}
		for i, part := range parts {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			q, err := resource.ParseQuantity(part)
			if err != nil {
				return fmt.Errorf("wrong format of Capacity %s with err %w", r, err)
			}
			if i == 0 {
				c.lower = &q
			} else {
				c.upper = &q
			}
		}
		if c.lower != nil && c.upper != nil && c.upper.Sign() != 0 && c.lower.Cmp(*c.upper) > 0 {
			return fmt.Errorf("illegal values for capacity %s", r)
		}
	}
	if csi := c.doc.CSI; csi != nil && csi.Driver == "" && len(csi.VolumeAttributes) > 0 {
		return errors.New("csi driver should not be empty when filtering by volume attributes")
	}
	for _, phase := range c.doc.PVCPhase {
		switch corev1.PersistentVolumeClaimPhase(phase) {
		case corev1.ClaimPending, corev1.ClaimBound, corev1.ClaimLost:
		default:
			return fmt.Errorf("pvcPhase %q is none of Pending, Bound, Lost", phase)
		}
	}
	return nil
}

// Volume is what the conditions look at: a claim and, when it is bound,
// its volume.
type Volume struct {
	PV  *corev1.PersistentVolume
	PVC *corev1.PersistentVolumeClaim
}

// Match returns the action of the first policy whose conditions all hold
// for the volume, or nil.
func (p *Policies) Match(v Volume) *Action {
	if p == nil {
		return nil
	}
	for i := range p.volumes {
		if p.volumes[i].conditions.match(v) {
			return &p.volumes[i].action
		}
	}
	return nil
}

// match reports whether every condition holds (an unset one always does).
func (c *conditions) match(v Volume) bool {
	d := c.doc
	var capacity resource.Quantity
	var class, volumeType string
	var nfs *corev1.NFSVolumeSource
	var csi *corev1.CSIPersistentVolumeSource
	if pv := v.PV; pv != nil {
		if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
			capacity = q
		}
		class, nfs, csi, volumeType = pv.Spec.StorageClassName, pv.Spec.NFS, pv.Spec.CSI, TypeOf(pv)
	}
	if c.lower != nil && capacity.Cmp(*c.lower) < 0 {
		return false
	}
	if c.upper != nil && c.upper.Sign() != 0 && capacity.Cmp(*c.upper) > 0 {
		return false
	}
	if len(d.StorageClass) > 0 && (class == "" || !slices.Contains(d.StorageClass, class)) {
		return false
	}
	if d.NFS != nil && (nfs == nil || d.NFS.Server != "" && d.NFS.Server != nfs.Server || d.NFS.Path != "" && d.NFS.Path != nfs.Path) {
		return false
	}
	if d.CSI != nil {
		if csi == nil || d.CSI.Driver != "" && d.CSI.Driver != csi.Driver {
			return false
		}
		for k, want := range d.CSI.VolumeAttributes {
			if got, ok := csi.VolumeAttributes[k]; !ok || got != want {
				return false
			}
		}
	}
	if len(d.VolumeTypes) > 0 && !slices.Contains(d.VolumeTypes, volumeType) {
		return false
	}
	var claimLabels map[string]string
	var phase string
	if v.PVC != nil {
		claimLabels, phase = v.PVC.Labels, string(v.PVC.Status.Phase)
	}
	if len(d.PVCLabels) > 0 && !labels.SelectorFromSet(d.PVCLabels).Matches(labels.Set(claimLabels)) {
		return false
	}
	if len(d.PVCPhase) > 0 && !slices.Contains(d.PVCPhase, phase) {
		return false
	}
	return true
}

// TypeOf is a volume's type as Velero names it: the name of the one
// volume source its spec sets (csi, nfs, hostPath, awsElasticBlockStore,
// ...), "" for none.
func TypeOf(pv *corev1.PersistentVolume) string {
	data, err := json.Marshal(pv.Spec.PersistentVolumeSource)
	if err != nil {
		return ""
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(data, &set); err != nil {
		return ""
	}
	for k, v := range set {
		if string(v) != "null" {
			return k
		}
	}
	return ""
}

type contextKey struct{}

// NewContext returns a context carrying the policies of the backup it
// runs: the backup engine sets them once per run, the item actions read
// them (FromContext).
func NewContext(ctx context.Context, p *Policies) context.Context {
	return context.WithValue(ctx, contextKey{}, p)
}

// FromContext returns the policies of the backup ctx runs (nil: none,
// which matches nothing).
func FromContext(ctx context.Context) *Policies {
	p, _ := ctx.Value(contextKey{}).(*Policies)
	return p
}

// Read reads the policies a backup names (spec.resourcePolicy): a
// ConfigMap of the backup's namespace in the source cluster, as Velero
// reads it. Its errors say which ConfigMap and why (the backup's
// validation errors).
func Read(ctx context.Context, kube kubernetes.Interface, b *velerov1.Backup) (*Policies, error) {
	ref := b.Spec.ResourcePolicy
	if ref == nil {
		return nil, nil
	}
	if !strings.EqualFold(ref.Kind, "configmap") {
		return nil, fmt.Errorf("resourcePolicy: kind %q: resource policies are in a ConfigMap (kind: configmap)", ref.Kind)
	}
	cm, err := kube.CoreV1().ConfigMaps(b.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("fail to get ResourcePolicies %s/%s ConfigMap with error %v", b.Namespace, ref.Name, err)
	}
	p, err := FromConfigMap(cm)
	if err != nil {
		return nil, fmt.Errorf("fail to read the ResourcePolicies from ConfigMap %s/%s with error %v", b.Namespace, ref.Name, err)
	}
	return p, nil
}
