package nonadmin

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	oadpinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/oadp/v1alpha1"
	veleroinformers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// SecretResyncInterval is how often an approved location's Secret is
// copied again (a tenant's credentials rotated reach the copy).
const SecretResyncInterval = time.Minute

// MessageNoSecrets says why a tenant's location cannot be used by a
// standalone server.
const MessageNoSecrets = "this server reads no Secrets (standalone mode): tenants' storage locations need the server to run aggregated in a cluster"

// BSLConfig is what the NonAdminBackupStorageLocation engine needs.
type BSLConfig struct {
	Client versioned.Interface
	// Secrets reads tenants' Secrets and writes their copies in the admin
	// namespace: the host cluster's; nil on a standalone server.
	Secrets typedcorev1.SecretsGetter
	// AdminNamespace holds the requests, Secret copies and Velero
	// locations made for tenants.
	AdminNamespace string
	Locations      oadpinformers.NonAdminBackupStorageLocationInformer
	Requests       oadpinformers.NonAdminBackupStorageLocationRequestInformer
	// VeleroLocations of the admin namespace.
	VeleroLocations veleroinformers.BackupStorageLocationInformer
	DPAs            oadpinformers.DataProtectionApplicationInformer
	Observers       []status.Observer
}

// BSLController is the NonAdminBackupStorageLocation engine: each tenant
// location gets a request in the admin namespace; once the admin approves
// it (or approval is not required), the tenant's credential Secret is
// copied into the admin namespace and a Velero location is made that
// stores under the tenant's own prefix. Pending, rejected or withdrawn
// approval removes both.
type BSLController struct {
	*reconcile.Loop
	cfg       BSLConfig
	locations oadplisters.NonAdminBackupStorageLocationLister
	requests  oadplisters.NonAdminBackupStorageLocationRequestLister
	velero    velerolisters.BackupStorageLocationLister
	dpas      oadplisters.DataProtectionApplicationLister
	status    status.Writer
	// orphans removes what was made for a location that is gone.
	orphans *orphans
}

// NewBSLController returns the engine.
func NewBSLController(cfg BSLConfig) (*BSLController, error) {
	c := &BSLController{cfg: cfg, locations: cfg.Locations.Lister(), requests: cfg.Requests.Lister(), velero: cfg.VeleroLocations.Lister(),
		dpas: cfg.DPAs.Lister(), status: status.Writer{Engine: oadpv1alpha1.EngineNonAdminBSL, Observers: cfg.Observers}}
	c.Loop = reconcile.NewLoop(oadpv1alpha1.EngineNonAdminBSL, c.sync)
	if err := c.Watch(cfg.Locations.Informer()); err != nil {
		return nil, err
	}
	if err := c.WatchMapped(cfg.Requests.Informer(), locationLink.route); err != nil {
		return nil, err
	}
	if err := c.WatchMapped(cfg.VeleroLocations.Informer(), locationLink.route); err != nil {
		return nil, err
	}
	// The policy decides what is accepted and whether approval is needed.
	if err := c.WatchMapped(cfg.DPAs.Informer(), func(any) []cache.ObjectName {
		all, err := c.locations.List(labels.Everything())
		if err != nil {
			return nil
		}
		keys := make([]cache.ObjectName, 0, len(all))
		for _, l := range all {
			keys = append(keys, cache.MetaObjectToName(l))
		}
		return keys
	}); err != nil {
		return nil, err
	}
	// A location gone (its finalizer removed by hand) leaves its admin
	// side behind.
	var err error
	if c.orphans, err = orphanLoopOf(oadpv1alpha1.EngineNonAdminBSL, cfg.AdminNamespace, cfg.Locations.Informer(),
		func(l *oadpv1alpha1.NonAdminBackupStorageLocation) string {
			if l.Status.VeleroBackupStorageLocation == nil {
				return ""
			}
			return l.Status.VeleroBackupStorageLocation.NACUUID
		}, c.syncOrphan, cfg.VeleroLocations.Informer(), cfg.Requests.Informer()); err != nil {
		return nil, err
	}
	if cfg.Secrets != nil {
		// The Secret copies: one left without its location and request.
		c.orphans.more = func(ctx context.Context) ([]cache.ObjectName, error) {
			list, err := cfg.Secrets.Secrets(cfg.AdminNamespace).List(ctx, metav1.ListOptions{LabelSelector: oadpv1alpha1.NabslOriginNACUUIDLabel})
			if err != nil {
				return nil, fmt.Errorf("listing the Secret copies of tenants' locations: %w", err)
			}
			keys := make([]cache.ObjectName, 0, len(list.Items))
			for i := range list.Items {
				keys = append(keys, cache.MetaObjectToName(&list.Items[i]))
			}
			return keys, nil
		}
	}
	return c, nil
}

// Orphans is the engine's orphan loop, for the garbage collection.
func (c *BSLController) Orphans() Resyncer { return c.orphans }

// Run processes locations and orphans until ctx is done.
func (c *BSLController) Run(ctx context.Context, workers int) {
	go c.orphans.Run(ctx, 1)
	c.Loop.Run(ctx, workers)
}

// syncOrphan deletes the Velero location, the Secret copy and the request
// made for a NonAdminBackupStorageLocation that is gone or names another
// (key: the admin-side name, the NACUUID). The backups made on it stay.
func (c *BSLController) syncOrphan(ctx context.Context, key cache.ObjectName) error {
	// Whichever of the three is left names the location it was made for.
	var made metav1.Object
	if bsl, err := c.velero.BackupStorageLocations(c.cfg.AdminNamespace).Get(key.Name); err == nil {
		made = bsl
	} else if req, err := c.requests.NonAdminBackupStorageLocationRequests(c.cfg.AdminNamespace).Get(key.Name); err == nil {
		made = req
	} else if c.cfg.Secrets != nil {
		s, err := c.cfg.Secrets.Secrets(c.cfg.AdminNamespace).Get(ctx, key.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading Secret %s/%s: %w", c.cfg.AdminNamespace, key.Name, err)
		}
		if err == nil {
			made = s
		}
	}
	if made == nil {
		return nil
	}
	id, ns, name, ok := locationLink.origin(made)
	if !ok || made.GetDeletionTimestamp() != nil || made.GetName() != id {
		return nil
	}
	owned, err := tenantOwns(ctx, func(ns, name string) (*oadpv1alpha1.NonAdminBackupStorageLocation, error) {
		return c.locations.NonAdminBackupStorageLocations(ns).Get(name)
	}, func(ctx context.Context, ns, name string) (*oadpv1alpha1.NonAdminBackupStorageLocation, error) {
		return c.cfg.Client.OadpV1alpha1().NonAdminBackupStorageLocations(ns).Get(ctx, name, metav1.GetOptions{})
	}, func(l *oadpv1alpha1.NonAdminBackupStorageLocation) bool {
		return l.Status.VeleroBackupStorageLocation != nil && l.Status.VeleroBackupStorageLocation.NACUUID == id
	}, ns, name)
	if owned || err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Deleting what was made for a NonAdminBackupStorageLocation that is gone (backup storage location, Secret copy, request)", "nacuuid", id, "nonadminbackupstoragelocation", ns+"/"+name)
	gone := &oadpv1alpha1.NonAdminBackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status: oadpv1alpha1.NonAdminBackupStorageLocationStatus{VeleroBackupStorageLocation: &oadpv1alpha1.VeleroBackupStorageLocation{NACUUID: id}}}
	if err := c.removeAdminSide(ctx, gone); err != nil {
		return err
	}
	return c.deleteRequest(ctx, gone)
}

// bslWrite is what one pass decided to write into a location's status.
type bslWrite func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus)

func (c *BSLController) sync(ctx context.Context, key cache.ObjectName) error {
	l, err := c.locations.NonAdminBackupStorageLocations(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.DeletionTimestamp != nil {
		return c.delete(ctx, l)
	}
	return c.reconcile(ctx, l)
}

// reconcile: the spec checked against the policy, the NACUUID recorded,
// the request made, and the admin's decision carried out.
func (c *BSLController) reconcile(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation) error {
	logger := klog.FromContext(ctx).WithValues("nonadminbackupstoragelocation", klog.KObj(l))
	policy, err := policyOf(c.dpas, c.cfg.AdminNamespace)
	if err != nil {
		return err
	}
	var spec oadp.NonAdminBackupStorageLocationSpec
	if err := oadpv1alpha1.Convert_v1alpha1_NonAdminBackupStorageLocationSpec_To_oadp_NonAdminBackupStorageLocationSpec(&l.Spec, &spec, nil); err != nil {
		return err
	}
	if errs := oadpvalidation.CheckNonAdminBSL(&spec, policy); len(errs) > 0 {
		// Refused (a policy changed since admission): nothing of it is
		// left on the admin side until the policy lets it go.
		problem := errs.ToAggregate().Error()
		err := c.withdraw(ctx, l, func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
			backOff(st)
			setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminConditionAccepted, false, oadpv1alpha1.ReasonBslSpecValidation, problem)
		})
		logger.V(2).Info("NonAdminBackupStorageLocation refused", "problem", problem)
		c.AddAfter(cache.MetaObjectToName(l), RecheckInterval)
		return err
	}
	// The NACUUID is recorded before anything is made for it.
	l, err = c.writeStatus(ctx, l, func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
		if st.Phase == "" {
			st.Phase = oadpv1alpha1.NonAdminPhaseNew
		}
		setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminConditionAccepted, true, oadpv1alpha1.ReasonBslSpecValidation, oadpv1alpha1.MessageBslSpecValid)
		if st.VeleroBackupStorageLocation == nil || st.VeleroBackupStorageLocation.NACUUID == "" {
			id := oadpv1alpha1.NewNACUUID(l.Namespace, l.Name)
			st.VeleroBackupStorageLocation = &oadpv1alpha1.VeleroBackupStorageLocation{NACUUID: id, Name: id, Namespace: c.cfg.AdminNamespace}
		}
	})
	if err != nil {
		return ignoreGone(err)
	}
	req, err := c.ensureRequest(ctx, l, policy)
	if err != nil {
		return err
	}
	switch req.Spec.ApprovalDecision {
	case oadpv1alpha1.NonAdminBSLRequestApproved:
		write, err := c.approved(ctx, l, &spec, policy)
		if err != nil {
			return err
		}
		_, err = c.writeStatus(ctx, l, write)
		c.AddAfter(cache.MetaObjectToName(l), SecretResyncInterval)
		return ignoreGone(err)
	case oadpv1alpha1.NonAdminBSLRequestRejected:
		return c.notApproved(ctx, l, oadpv1alpha1.ReasonBslSpecRejected, oadpv1alpha1.MessageBslRejected, true)
	default:
		return c.notApproved(ctx, l, oadpv1alpha1.ReasonBslSpecApprovalPending, oadpv1alpha1.MessageBslApprovalPending, false)
	}
}

// backOff moves a location not made yet to BackingOff (one Created stays:
// phases do not move back).
func backOff(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
	if st.Phase != oadpv1alpha1.NonAdminPhaseCreated {
		st.Phase = oadpv1alpha1.NonAdminPhaseBackingOff
	}
}

// notApproved removes the admin side of a location the admin has not
// approved (pending), rejected, or withdrawn approval from.
func (c *BSLController) notApproved(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation, reason, message string, rejected bool) error {
	return c.withdraw(ctx, l, func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
		if rejected {
			backOff(st)
		}
		setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminBSLConditionApproved, false, reason, message)
	})
}

// withdraw removes l's admin side (Velero location, Secret copy) and
// writes its status: what mutate says, and nothing synced any more.
func (c *BSLController) withdraw(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation, mutate bslWrite) error {
	if err := c.removeAdminSide(ctx, l); err != nil {
		return err
	}
	_, err := c.writeStatus(ctx, l, func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
		mutate(st)
		meta.RemoveStatusCondition(&st.Conditions, string(oadpv1alpha1.NonAdminBSLConditionSecretSynced))
		meta.RemoveStatusCondition(&st.Conditions, string(oadpv1alpha1.NonAdminBSLConditionBSLSynced))
		if st.VeleroBackupStorageLocation != nil {
			st.VeleroBackupStorageLocation.Status = nil
		}
	})
	return ignoreGone(err)
}

// ensureRequest makes the location's request (approved at once when the
// policy does not require approval), or reads it, and writes its status.
func (c *BSLController) ensureRequest(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation, policy *oadpvalidation.Policy) (*oadpv1alpha1.NonAdminBackupStorageLocationRequest, error) {
	id := l.Status.VeleroBackupStorageLocation.NACUUID
	required := policy != nil && policy.NonAdmin != nil && policy.NonAdmin.RequireApprovalForBSL != nil && *policy.NonAdmin.RequireApprovalForBSL
	decision := oadpv1alpha1.NonAdminBSLRequestApproved
	if required {
		decision = oadpv1alpha1.NonAdminBSLRequestPending
	}
	req, err := c.requests.NonAdminBackupStorageLocationRequests(c.cfg.AdminNamespace).Get(id)
	if apierrors.IsNotFound(err) {
		req, err = c.cfg.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(c.cfg.AdminNamespace).Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocationRequest{
			ObjectMeta: c.adminMeta(l),
			Spec:       oadpv1alpha1.NonAdminBackupStorageLocationRequestSpec{ApprovalDecision: decision},
		}, metav1.CreateOptions{FieldManager: c.status.Engine})
		if apierrors.IsAlreadyExists(err) {
			req, err = c.cfg.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(c.cfg.AdminNamespace).Get(ctx, id, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the request of NonAdminBackupStorageLocation %s/%s: %w", l.Namespace, l.Name, err)
	}
	if !locationLink.madeFor(req, id, l.Namespace) {
		return nil, fmt.Errorf("NonAdminBackupStorageLocationRequest %s exists and was not made for NonAdminBackupStorageLocation %s/%s", id, l.Namespace, l.Name)
	}
	if !required && (req.Spec.ApprovalDecision == "" || req.Spec.ApprovalDecision == oadpv1alpha1.NonAdminBSLRequestPending) {
		// Approval no longer required: what waited for it is approved; an
		// admin's rejection stands.
		cur := req.DeepCopy()
		cur.Spec.ApprovalDecision = oadpv1alpha1.NonAdminBSLRequestApproved
		if req, err = c.cfg.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(c.cfg.AdminNamespace).Update(ctx, cur, metav1.UpdateOptions{FieldManager: c.status.Engine}); err != nil {
			return nil, err
		}
	}
	phase := map[oadpv1alpha1.NonAdminBSLRequest]oadpv1alpha1.NonAdminBSLRequestPhase{
		oadpv1alpha1.NonAdminBSLRequestApproved: oadpv1alpha1.NonAdminBSLRequestPhaseApproved,
		oadpv1alpha1.NonAdminBSLRequestRejected: oadpv1alpha1.NonAdminBSLRequestPhaseRejected,
	}[req.Spec.ApprovalDecision]
	if phase == "" {
		phase = oadpv1alpha1.NonAdminBSLRequestPhasePending
	}
	source := &oadpv1alpha1.SourceNonAdminBSL{RequestedSpec: l.Spec.BackupStorageLocationSpec, NACUUID: id, Name: l.Name, Namespace: l.Namespace}
	if req.Status.Phase == phase && equality.Semantic.DeepEqual(req.Status.SourceNonAdminBSL, source) {
		return req, nil // as read: no GET and PUT each resync
	}
	return c.status.NonAdminBackupStorageLocationRequests(c.cfg.Client, c.cfg.AdminNamespace).Update(ctx, req, func(cur *oadpv1alpha1.NonAdminBackupStorageLocationRequest) {
		cur.Status.Phase = phase
		cur.Status.SourceNonAdminBSL = source.DeepCopy()
	})
}

// adminMeta is the metadata of what is made in the admin namespace for l:
// named by its NACUUID, linked to it by label and annotations.
func (c *BSLController) adminMeta(l *oadpv1alpha1.NonAdminBackupStorageLocation) metav1.ObjectMeta {
	id := l.Status.VeleroBackupStorageLocation.NACUUID
	return locationLink.objectMeta(c.cfg.AdminNamespace, id, id, l)
}

func (c *BSLController) madeFor(m metav1.Object, l *oadpv1alpha1.NonAdminBackupStorageLocation) bool {
	return locationLink.madeFor(m, l.Status.VeleroBackupStorageLocation.NACUUID, l.Namespace)
}

// approved copies the credential Secret and makes the Velero location,
// and returns what the status says of it.
func (c *BSLController) approved(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation, spec *oadp.NonAdminBackupStorageLocationSpec, policy *oadpvalidation.Policy) (bslWrite, error) {
	approve := func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
		setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminBSLConditionApproved, true, oadpv1alpha1.ReasonBslSpecApproved, oadpv1alpha1.MessageBslApproved)
	}
	internal := spec.BackupStorageLocationSpec.DeepCopy()
	oadpvalidation.EnforceBSL(internal, policy)
	secretReason, problem, err := c.copySecret(ctx, l, internal)
	if err != nil {
		return nil, err
	}
	if problem != "" {
		return func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
			approve(st)
			backOff(st)
			setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminBSLConditionSecretSynced, false, oadpv1alpha1.ReasonSecretSyncFailed, problem)
		}, nil
	}
	var want velerov1.BackupStorageLocationSpec
	if err := velerov1.Convert_velero_BackupStorageLocationSpec_To_v1_BackupStorageLocationSpec(
		oadpvalidation.TenantBSLSpec(l.Namespace, internal, l.Status.VeleroBackupStorageLocation.NACUUID), &want, nil); err != nil {
		return nil, err
	}
	tenantEncryption(&want, l.Status.VeleroBackupStorageLocation.NACUUID)
	bsl, bslReason, err := c.ensureLocation(ctx, l, &want)
	if err != nil {
		return func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
			approve(st)
			setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminBSLConditionSecretSynced, true, secretReason, oadpv1alpha1.MessageSecretSynced)
			setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminBSLConditionBSLSynced, false, oadpv1alpha1.ReasonBackupStorageLocationSyncError, err.Error())
		}, nil
	}
	return func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
		approve(st)
		st.Phase = oadpv1alpha1.NonAdminPhaseCreated
		setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminBSLConditionSecretSynced, true, secretReason, oadpv1alpha1.MessageSecretSynced)
		setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminBSLConditionBSLSynced, true, bslReason, oadpv1alpha1.MessageBSLSynced)
		st.VeleroBackupStorageLocation.Status = bsl.Status.DeepCopy()
	}, nil
}

// copySecret copies the key of the tenant's credential Secret into the
// admin namespace, under the NACUUID; problem says why it cannot.
func (c *BSLController) copySecret(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation, spec *velero.BackupStorageLocationSpec) (reason, problem string, err error) {
	if c.cfg.Secrets == nil {
		return "", MessageNoSecrets, nil
	}
	ref := spec.Credential
	src, err := c.cfg.Secrets.Secrets(l.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Sprintf("Secret %s of namespace %s, named in spec.backupStorageLocationSpec.credential, does not exist", ref.Name, l.Namespace), nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading Secret %s/%s: %w", l.Namespace, ref.Name, err)
	}
	data, ok := src.Data[ref.Key]
	if !ok {
		return "", fmt.Sprintf("Secret %s of namespace %s has no key %q", ref.Name, l.Namespace, ref.Key), nil
	}
	want := &corev1.Secret{ObjectMeta: c.adminMeta(l), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{ref.Key: data}}
	if encryption.Required(spec.Config) {
		identities, problem, err := c.tenantIdentities(ctx, l, spec.Config)
		if problem != "" || err != nil {
			return "", problem, err
		}
		if ref.Key == encryption.TenantCopyKey {
			return "", fmt.Sprintf("the key %q of Secret %s, named in spec.backupStorageLocationSpec.credential, is the one the copy keeps the encryption keys under: name the credentials another key", ref.Key, ref.Name), nil
		}
		want.Data[encryption.TenantCopyKey] = identities
	}
	secrets := c.cfg.Secrets.Secrets(c.cfg.AdminNamespace)
	cur, err := secrets.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := secrets.Create(ctx, want, metav1.CreateOptions{FieldManager: c.status.Engine}); err != nil {
			return "", "", fmt.Errorf("copying Secret %s/%s: %w", l.Namespace, ref.Name, err)
		}
		return oadpv1alpha1.ReasonSecretCreated, "", nil
	case err != nil:
		return "", "", fmt.Errorf("reading Secret %s/%s: %w", want.Namespace, want.Name, err)
	case !c.madeFor(cur, l):
		return "", fmt.Sprintf("Secret %s of the admin namespace exists and was not made for this location", want.Name), nil
	case equality.Semantic.DeepEqual(cur.Data, want.Data):
		return oadpv1alpha1.ReasonSecretCreated, "", nil
	}
	cur = cur.DeepCopy()
	cur.Data = want.Data
	if _, err := secrets.Update(ctx, cur, metav1.UpdateOptions{FieldManager: c.status.Engine}); err != nil {
		return "", "", fmt.Errorf("updating the copy of Secret %s/%s: %w", l.Namespace, ref.Name, err)
	}
	return oadpv1alpha1.ReasonSecretUpdated, "", nil
}

// tenantIdentities reads the age identities of a tenant's location from
// the Secret of the tenant's namespace its config names; problem says why
// it cannot.
func (c *BSLController) tenantIdentities(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation, config map[string]string) (data []byte, problem string, err error) {
	name, key := config[encryption.ConfigSecret], config[encryption.ConfigSecretKey]
	if key == "" {
		key = encryption.DefaultSecretKey
	}
	if name == "" {
		return nil, fmt.Sprintf("spec.backupStorageLocationSpec.config.%s: a tenant's location reads its encryption keys from a Secret of its namespace only", encryption.ConfigSecret), nil
	}
	src, err := c.cfg.Secrets.Secrets(l.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("Secret %s of namespace %s, named in spec.backupStorageLocationSpec.config.%s, does not exist", name, l.Namespace, encryption.ConfigSecret), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading Secret %s/%s: %w", l.Namespace, name, err)
	}
	data, ok := src.Data[key]
	if !ok {
		return nil, fmt.Sprintf("Secret %s of namespace %s has no key %q (spec.backupStorageLocationSpec.config.%s)", name, l.Namespace, key, encryption.ConfigSecretKey), nil
	}
	if _, err := encryption.ParseKeys(data, config[encryption.ConfigRecipients]); err != nil {
		return nil, fmt.Sprintf("Secret %s of namespace %s, key %q: %v", name, l.Namespace, key, err), nil
	}
	return data, "", nil
}

// tenantEncryption points the encryption config of a tenant's Velero
// location at the keys copied with its credentials (the Secret named id).
func tenantEncryption(spec *velerov1.BackupStorageLocationSpec, id string) {
	if !encryption.Required(spec.Config) {
		return
	}
	config := maps.Clone(spec.Config)
	delete(config, encryption.ConfigIdentitiesFile)
	config[encryption.ConfigSecret], config[encryption.ConfigSecretKey] = id, encryption.TenantCopyKey
	spec.Config = config
}

// ensureLocation makes the Velero location, or brings its spec to want.
func (c *BSLController) ensureLocation(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation, want *velerov1.BackupStorageLocationSpec) (*velerov1.BackupStorageLocation, string, error) {
	client := c.cfg.Client.VeleroV1().BackupStorageLocations(c.cfg.AdminNamespace)
	id := l.Status.VeleroBackupStorageLocation.NACUUID
	cur, err := c.velero.BackupStorageLocations(c.cfg.AdminNamespace).Get(id)
	if apierrors.IsNotFound(err) {
		cur, err = client.Get(ctx, id, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		created, err := client.Create(ctx, &velerov1.BackupStorageLocation{ObjectMeta: c.adminMeta(l), Spec: *want}, metav1.CreateOptions{FieldManager: c.status.Engine})
		if err != nil {
			return nil, "", fmt.Errorf("creating backup storage location %s: %w", id, err)
		}
		return created, oadpv1alpha1.ReasonBackupStorageLocationCreated, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading backup storage location %s: %w", id, err)
	}
	if !c.madeFor(cur, l) {
		return nil, "", fmt.Errorf("backup storage location %s exists and was not made for this location", id)
	}
	if equality.Semantic.DeepEqual(cur.Spec, *want) {
		return cur, oadpv1alpha1.ReasonBackupStorageLocationCreated, nil
	}
	upd := cur.DeepCopy()
	upd.Spec = *want
	out, err := client.Update(ctx, upd, metav1.UpdateOptions{FieldManager: c.status.Engine})
	if err != nil {
		return nil, "", fmt.Errorf("updating backup storage location %s: %w", id, err)
	}
	return out, oadpv1alpha1.ReasonBackupStorageLocationUpdated, nil
}

// removeAdminSide deletes the Velero location and the Secret copy made for
// l (the request stays: it holds the admin's decision).
func (c *BSLController) removeAdminSide(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation) error {
	if l.Status.VeleroBackupStorageLocation == nil || l.Status.VeleroBackupStorageLocation.NACUUID == "" {
		return nil
	}
	id := l.Status.VeleroBackupStorageLocation.NACUUID
	if bsl, err := c.velero.BackupStorageLocations(c.cfg.AdminNamespace).Get(id); err == nil && c.madeFor(bsl, l) {
		if err := reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.VeleroV1().BackupStorageLocations(c.cfg.AdminNamespace).Delete, bsl.Name, bsl.UID); err != nil {
			return fmt.Errorf("deleting backup storage location %s: %w", id, err)
		}
	}
	if c.cfg.Secrets == nil {
		return nil
	}
	secrets := c.cfg.Secrets.Secrets(c.cfg.AdminNamespace)
	s, err := secrets.Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Secret %s/%s: %w", c.cfg.AdminNamespace, id, err)
	}
	if !c.madeFor(s, l) {
		return nil
	}
	if err := reconcile.DeleteIfUnchanged(ctx, secrets.Delete, s.Name, s.UID); err != nil {
		return fmt.Errorf("deleting Secret %s/%s: %w", c.cfg.AdminNamespace, id, err)
	}
	return nil
}

// delete: the location's admin side and its request go, then the
// finalizer. Backups made on it stay (their data is in the tenant's
// bucket); backups not made yet back off.
func (c *BSLController) delete(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation) error {
	l, err := c.writeStatus(ctx, l, func(st *oadpv1alpha1.NonAdminBackupStorageLocationStatus) {
		st.Phase = oadpv1alpha1.NonAdminPhaseDeleting
		setCondition(&st.Conditions, l.Generation, oadpv1alpha1.NonAdminConditionDeleting, true, oadpv1alpha1.ReasonDeletionPending, oadpv1alpha1.MessageBSLDeletionPending)
	})
	if err != nil {
		return ignoreGone(err)
	}
	if err := c.removeAdminSide(ctx, l); err != nil {
		return err
	}
	if err := c.deleteRequest(ctx, l); err != nil {
		return err
	}
	return reconcile.RemoveFinalizer(ctx, c.cfg.Client.OadpV1alpha1().NonAdminBackupStorageLocations(l.Namespace), l, oadpv1alpha1.NonAdminBackupStorageLocationFinalizer, c.status.Engine)
}

// deleteRequest deletes the request made for l.
func (c *BSLController) deleteRequest(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation) error {
	vb := l.Status.VeleroBackupStorageLocation
	if vb == nil || vb.NACUUID == "" {
		return nil
	}
	req, err := c.requests.NonAdminBackupStorageLocationRequests(c.cfg.AdminNamespace).Get(vb.NACUUID)
	if err != nil || !c.madeFor(req, l) {
		return nil
	}
	if err := reconcile.DeleteIfUnchanged(ctx, c.cfg.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(c.cfg.AdminNamespace).Delete, req.Name, req.UID); err != nil {
		return fmt.Errorf("deleting the request of NonAdminBackupStorageLocation %s/%s: %w", l.Namespace, l.Name, err)
	}
	return nil
}

func (c *BSLController) writeStatus(ctx context.Context, l *oadpv1alpha1.NonAdminBackupStorageLocation, mutate bslWrite) (*oadpv1alpha1.NonAdminBackupStorageLocation, error) {
	return c.status.NonAdminBackupStorageLocations(c.cfg.Client, l.Namespace).Update(ctx, l, func(cur *oadpv1alpha1.NonAdminBackupStorageLocation) { mutate(&cur.Status) })
}
