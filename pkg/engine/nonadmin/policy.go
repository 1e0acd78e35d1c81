package nonadmin

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	oadpinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/oadp/v1alpha1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
)

// policyOf is the policy in effect among the DataProtectionApplications
// the lister holds (the admin namespace's), as admission chooses it.
func policyOf(dpas oadplisters.DataProtectionApplicationLister, namespace string) (*oadpvalidation.Policy, error) {
	list, err := dpas.DataProtectionApplications(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	internal := make([]oadp.DataProtectionApplication, len(list))
	for i, d := range list {
		if err := oadpv1alpha1.Convert_v1alpha1_DataProtectionApplication_To_oadp_DataProtectionApplication(d, &internal[i], nil); err != nil {
			return nil, fmt.Errorf("reading DataProtectionApplication %s: %w", d.Name, err)
		}
	}
	return oadpvalidation.InEffect(internal), nil
}

// BackupSyncPeriod reads the policy's backupSyncPeriod from the
// DataProtectionApplications of namespace (an unreadable policy: 0, not
// synced).
func BackupSyncPeriod(dpas oadplisters.DataProtectionApplicationLister, namespace string) func() time.Duration {
	return func() time.Duration {
		policy, err := policyOf(dpas, namespace)
		if err != nil {
			return 0
		}
		return policy.BackupSyncPeriod()
	}
}

// MaxBackupsPerNamespace reads the most NonAdminBackups a tenant namespace
// may hold (0: no limit) from the DataProtectionApplications of namespace.
func MaxBackupsPerNamespace(dpas oadplisters.DataProtectionApplicationLister, namespace string) func() int {
	return func() int {
		policy, err := policyOf(dpas, namespace)
		if err != nil {
			return 0
		}
		return policy.Limits().MaxBackupsPerNamespace
	}
}

// AllowedLocationEndpoints reads the endpoints the policy lets tenants'
// storage locations reach (objectstore.Opener.TenantEndpoints) from the
// DataProtectionApplications of namespace.
func AllowedLocationEndpoints(dpas oadplisters.DataProtectionApplicationLister, namespace string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		policy, err := policyOf(dpas, namespace)
		if err != nil {
			return nil, err
		}
		return policy.AllowedLocationEndpoints(), nil
	}
}

// PolicyController (engine oadpv1alpha1.EngineNonAdminPolicy) writes each
// DataProtectionApplication's status: whether its nonAdmin policy is the
// one in effect, and which of the fields set Backstop keeps without acting
// on them.
type PolicyController struct {
	*reconcile.Loop
	client    versioned.Interface
	namespace string
	dpas      oadplisters.DataProtectionApplicationLister
	status    status.Writer
}

// NewPolicyController returns the loop over the admin namespace's DPAs.
func NewPolicyController(client versioned.Interface, namespace string, dpas oadpinformers.DataProtectionApplicationInformer) (*PolicyController, error) {
	c := &PolicyController{client: client, namespace: namespace, dpas: dpas.Lister(), status: status.Writer{Engine: oadpv1alpha1.EngineNonAdminPolicy}}
	c.Loop = reconcile.NewLoop(oadpv1alpha1.EngineNonAdminPolicy, c.sync)
	// Any DPA's change may change which one is in effect: all are synced.
	if err := c.WatchMapped(dpas.Informer(), func(any) []cache.ObjectName {
		all, err := c.dpas.DataProtectionApplications(namespace).List(labels.Everything())
		if err != nil {
			return nil
		}
		keys := make([]cache.ObjectName, 0, len(all))
		for _, d := range all {
			keys = append(keys, cache.MetaObjectToName(d))
		}
		return keys
	}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *PolicyController) sync(ctx context.Context, key cache.ObjectName) error {
	dpa, err := c.dpas.DataProtectionApplications(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	policy, err := policyOf(c.dpas, c.namespace)
	if err != nil {
		return err
	}
	reconciled, reason, message := true, oadpv1alpha1.ReasonReconciled, "spec.nonAdmin is the policy for tenants in effect"
	switch {
	case dpa.Spec.NonAdmin == nil:
		reconciled, reason, message = false, oadpv1alpha1.ReasonNoPolicy, "no spec.nonAdmin: this DataProtectionApplication sets no policy for tenants"
	case policy == nil || policy.DPA != dpa.Name:
		reconciled, reason, message = false, oadpv1alpha1.ReasonNotInEffect, fmt.Sprintf("the older DataProtectionApplication %s holds the policy in effect", policyName(policy))
	}
	kept := NotActedOn(&dpa.Spec)
	_, err = c.status.DataProtectionApplications(c.client, dpa.Namespace).Update(ctx, dpa, func(cur *oadpv1alpha1.DataProtectionApplication) {
		setCondition(&cur.Status.Conditions, cur.Generation, oadpv1alpha1.ConditionReconciled, reconciled, reason, message)
		if len(kept) == 0 {
			setCondition(&cur.Status.Conditions, cur.Generation, oadpv1alpha1.ConditionNotActedOn, false, oadpv1alpha1.ReasonAllActedOn, "Backstop acts on every field set")
		} else {
			setCondition(&cur.Status.Conditions, cur.Generation, oadpv1alpha1.ConditionNotActedOn, true, oadpv1alpha1.ReasonKeptOnly,
				"Backstop keeps but does not act on: "+strings.Join(kept, ", "))
		}
	})
	return ignoreGone(err)
}

func policyName(p *oadpvalidation.Policy) string {
	if p == nil {
		return "(none)"
	}
	return p.DPA
}

// actedOnNonAdmin are the spec.nonAdmin fields Backstop acts on.
var actedOnNonAdmin = map[string]bool{"enable": true, "enforceBackupSpec": true, "enforceRestoreSpec": true, "enforceBSLSpec": true, "requireApprovalForBSL": true,
	"garbageCollectionPeriod": true, "backupSyncPeriod": true, "allowedLocationEndpoints": true, "tenantLimits": true}

// NotActedOn lists the fields of spec that are set and that Backstop keeps
// without acting on them: the operator's deployment settings, and the
// parts of spec.nonAdmin not acted on yet.
func NotActedOn(spec *oadpv1alpha1.DataProtectionApplicationSpec) []string {
	var out []string
	walk := func(v reflect.Value, prefix string, skip func(string) bool) {
		for i := 0; i < v.NumField(); i++ {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			if skip(name) || v.Field(i).IsZero() {
				continue
			}
			out = append(out, prefix+name)
		}
	}
	walk(reflect.ValueOf(spec).Elem(), "spec.", func(name string) bool { return name == "nonAdmin" })
	if spec.NonAdmin != nil {
		walk(reflect.ValueOf(spec.NonAdmin).Elem(), "spec.nonAdmin.", func(name string) bool { return actedOnNonAdmin[name] })
	}
	return out
}
