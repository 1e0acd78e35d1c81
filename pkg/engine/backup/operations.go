package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// DefaultOperationSyncFrequency is how often running async operations are
// polled (Velero's --item-operation-sync-frequency).
const DefaultOperationSyncFrequency = 10 * time.Second

// ItemAction starts asynchronous operations for backed-up items that
// outlive item collection, as Velero's BackupItemAction v2 plugins do:
// the backup waits for them (WaitingForPluginOperations) before it
// finalizes.
type ItemAction interface {
	// Name names the action in the item operations file and the logs.
	Name() string
	// AppliesTo reports whether the action handles items of a resource
	// ("<resource>.<group>").
	AppliesTo(groupResource string) bool
	// Start starts an operation for an item and says what it did (an
	// empty OperationID: the item needs none). It may change the item
	// (Started.Modified): the tarball holds it as changed.
	Start(ctx context.Context, backup *velerov1.Backup, item *unstructured.Unstructured) (Started, error)
	// Progress reports on an operation.
	Progress(ctx context.Context, backup *velerov1.Backup, operationID string) (OperationProgress, error)
	// Cancel stops an operation (timed out, or its backup cancelled).
	Cancel(ctx context.Context, backup *velerov1.Backup, operationID string) error
}

// Started is what an ItemAction's Start did for an item.
type Started struct {
	// OperationID names the operation; "" when the item needs none.
	OperationID string
	// Resource is what the operation is for, when not the item itself (the
	// VolumeSnapshot taken of a claim).
	Resource *ResourceIdentifier
	// PostOperationItems are the items to back up once the operation has
	// ended (OperationFinisher.FinalItems reads them).
	PostOperationItems []ResourceIdentifier
	// Modified: Start changed the item.
	Modified bool
	// Skipped says why the action did nothing for the item (logged).
	Skipped string
	// Warning is a warning of the backup about the item (logged, counted).
	Warning string
}

// ResourceMaker is an ItemAction that makes objects of some resources in
// the source cluster and adds them to the backup itself (FinalItems):
// item collection leaves those resources out, as Velero's backups leave
// out VolumeSnapshots and their contents.
type ResourceMaker interface {
	// MadeResources are the resources ("<resource>.<group>").
	MadeResources() []string
}

// OperationFinisher is an ItemAction whose operations leave items to the
// backup once they have ended, and objects in the cluster to let go of
// (Velero's finalize step, as its CSI actions have it). Before the backup
// completes, for each of its operations that completed, FinalItems gives
// what the tarball gets (the tarball is rewritten with them), then Release
// lets go of the cluster objects the tarball now holds; for each that
// failed, and for every operation of a backup that is cancelled, fails or
// is deleted, Discard removes what it made. Each is idempotent: a restart
// may run it again.
type OperationFinisher interface {
	ItemAction
	FinalItems(ctx context.Context, backup *velerov1.Backup, op *BackupOperation) (FinalItems, error)
	Release(ctx context.Context, backup *velerov1.Backup, op *BackupOperation) error
	Discard(ctx context.Context, backup *velerov1.Backup, op *BackupOperation) error
}

// FinalItems are what an ended operation adds to its backup.
type FinalItems struct {
	// Items are written to the tarball (replacing an item of the same
	// resource, namespace and name).
	Items []FinalItem
	// Volume is the operation's entry in the volume info file, if any.
	Volume *volumeinfo.BackupVolumeInfo
}

// FinalItem is an item added at the end of a backup.
type FinalItem struct {
	Resource items.Resource
	Object   *unstructured.Unstructured
}

// ItemDiscoverer is an ItemAction some of whose items are not API objects
// of the source cluster (the VMs that are libvirt domains). After the API
// items are collected, the backup asks it for the items of its resource,
// keeps those its filters take (namespace, resource, labels) and for which
// no operation was started yet, and starts the action's operations for
// them. They are not written to the tarball: only their operations back
// them up.
type ItemDiscoverer interface {
	ItemAction
	// DiscoveredResource is the resource of the discovered items.
	DiscoveredResource() items.Resource
	// Discover lists the items of the namespaces the backup takes
	// (includesNamespace). An error wrapping ErrNoSource says there is
	// nothing to discover from on this host (no libvirt daemon runs).
	Discover(ctx context.Context, backup *velerov1.Backup, includesNamespace func(string) bool) ([]*unstructured.Unstructured, error)
}

// OperationFinder is an ItemAction that finds in the source cluster the
// operations it started for a backup (by the backup's UID on what it
// made). A backup's item operations file is written when it begins to wait
// for them: one the server stopped in while it collected has recorded
// none, and at the next start its operations are found through this,
// cancelled and what they made discarded, so that nothing it started is
// left running or kept.
type OperationFinder interface {
	ItemAction
	// StartedOperations are the operations started for the backup, each
	// with its OperationID and Resource (what the operation is for).
	StartedOperations(ctx context.Context, backup *velerov1.Backup) ([]Started, error)
}

// ErrNoSource is the error of a discoverer whose source does not run here:
// the backup logs it, and it is no warning (a cluster without VMs has no
// libvirt daemon beside the server).
var ErrNoSource = errors.New("no source to discover from")

// OperationProgress is an operation's state as its action reports it.
type OperationProgress struct {
	// Completed: the operation has ended, successfully unless Err is set.
	Completed bool
	Err       string
	// NCompleted of NTotal OperationUnits are done.
	NCompleted, NTotal int64
	OperationUnits     string
	Description        string
}

// Operation phases, as Velero records them.
const (
	OperationPhaseNew        = "New"
	OperationPhaseInProgress = "InProgress"
	OperationPhaseCompleted  = "Completed"
	OperationPhaseFailed     = "Failed"
)

// ResourceIdentifier names an item, in Velero's JSON (field names without
// tags, as velero.ResourceIdentifier embeds schema.GroupResource).
type ResourceIdentifier struct {
	Group     string
	Resource  string
	Namespace string
	Name      string
}

// BackupOperation is one async operation, in Velero's
// itemoperation.BackupOperation JSON (<name>-itemoperations.json.gz).
type BackupOperation struct {
	Spec   BackupOperationSpec `json:"spec"`
	Status OperationStatus     `json:"status"`
}

// BackupOperationSpec says which action started the operation for which item.
type BackupOperationSpec struct {
	BackupName         string               `json:"backupName"`
	BackupUID          string               `json:"backupUID"`
	BackupItemAction   string               `json:"backupItemAction"`
	ResourceIdentifier ResourceIdentifier   `json:"resourceIdentifier"`
	OperationID        string               `json:"operationID"`
	PostOperationItems []ResourceIdentifier `json:"postOperationItems"`
}

// OperationStatus is an operation's last known state.
type OperationStatus struct {
	Phase          string       `json:"phase,omitempty"`
	Error          string       `json:"error,omitempty"`
	NCompleted     int64        `json:"nCompleted,omitempty"`
	NTotal         int64        `json:"nTotal,omitempty"`
	OperationUnits string       `json:"operationUnits,omitempty"`
	Description    string       `json:"description,omitempty"`
	Created        *metav1.Time `json:"created,omitempty"`
	Started        *metav1.Time `json:"started,omitempty"`
	Updated        *metav1.Time `json:"updated,omitempty"`
}

func (op *BackupOperation) done() bool {
	return op.Status.Phase == OperationPhaseCompleted || op.Status.Phase == OperationPhaseFailed
}

// operations are the async operations of one backup run.
type operations struct {
	actions []ItemAction
	backup  *velerov1.Backup
	log     *items.Log
	clock   clock.Clock
	list    []*BackupOperation
	byName  map[string]ItemAction
	// afterStart, if set, runs each time an operation has started, before
	// anything records it (a crash point).
	afterStart func()
}

func newOperations(actions []ItemAction, b *velerov1.Backup, log *items.Log, clk clock.Clock) *operations {
	o := &operations{actions: actions, backup: b, log: log, clock: clk, byName: map[string]ItemAction{}}
	for _, a := range actions {
		o.byName[a.Name()] = a
	}
	return o
}

// appliesTo reports whether an action starts operations for items of r.
func (o *operations) appliesTo(r items.Resource) bool {
	for _, a := range o.actions {
		if a.AppliesTo(r.GroupResource()) {
			return true
		}
	}
	return false
}

// start runs the actions that apply to a backed-up item, and reports
// whether one of them changed it. A failure to start is the backup's
// error, not the end of it.
func (o *operations) start(ctx context.Context, r items.Resource, item *unstructured.Unstructured) (modified bool) {
	for _, a := range o.actions {
		if !a.AppliesTo(r.GroupResource()) {
			continue
		}
		started, err := a.Start(ctx, o.backup, item)
		if err != nil {
			o.log.Error(item.GetNamespace(), items.ScopeOf(r), fmt.Sprintf("%s: starting the operation for %s %s: %v",
				a.Name(), r.GroupResource(), item.GetName(), err))
			continue
		}
		modified = modified || started.Modified
		if started.Skipped != "" {
			o.log.Info(started.Skipped, "action", a.Name())
		}
		if started.Warning != "" {
			o.log.Warning(item.GetNamespace(), items.ScopeOf(r), a.Name()+": "+started.Warning)
		}
		if started.OperationID == "" {
			continue
		}
		id := ResourceIdentifier{Group: r.GVR.Group, Resource: r.GVR.Resource, Namespace: item.GetNamespace(), Name: item.GetName()}
		if started.Resource != nil {
			id = *started.Resource
		}
		o.record(a, started, id)
		o.log.Info("Started an async operation", "action", a.Name(), "operationID", started.OperationID,
			"item", r.GroupResource()+" "+qualified(item.GetNamespace(), item.GetName()))
		if o.afterStart != nil {
			o.afterStart()
		}
	}
	return modified
}

// InSource reports whether the source cluster has an object (namespace ""
// for a cluster-scoped one, such as a Namespace).
type InSource func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (bool, error)

// namespacesGVR is the resource of Namespaces.
var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// discover starts the operations of the discovered items the filter takes.
// Where the source serves Namespaces (a cluster; standalone serves none, and
// has every namespace), a discovered item is taken only in a namespace it
// has; where it serves the item's resource itself, only when it has that
// object: what lies outside the cluster (a libvirt domain named after a
// namespace) decides nothing about what a namespace's backup holds. A nil
// has checks nothing.
func (o *operations) discover(ctx context.Context, filter *items.Filter, has InSource, served func(items.Resource) bool) {
	for _, a := range o.actions {
		d, ok := a.(ItemDiscoverer)
		if !ok {
			continue
		}
		r := d.DiscoveredResource()
		if !filter.IncludesResource(r) {
			continue
		}
		found, err := d.Discover(ctx, o.backup, filter.IncludesNamespace)
		if errors.Is(err, ErrNoSource) {
			o.log.Info("Nothing discovered", "action", a.Name(), "resource", r.GroupResource(), "reason", err.Error())
			continue
		}
		if err != nil {
			o.log.Warning("", items.ScopeVelero, fmt.Sprintf("%s: looking for %s: %v", a.Name(), r.GroupResource(), err))
			continue
		}
		namespaces := map[string]bool{}
		for _, item := range found {
			if !filter.IncludesNamespace(item.GetNamespace()) || !filter.IncludesItem(item.GetLabels()) || o.startedFor(r, item) {
				continue
			}
			if has != nil {
				what := r.GroupResource() + " " + qualified(item.GetNamespace(), item.GetName())
				exists, known := namespaces[item.GetNamespace()]
				if !known && !served(items.Resource{GVR: namespacesGVR}) {
					exists, known = true, true
				}
				if !known {
					var err error
					if exists, err = has(ctx, namespacesGVR, "", item.GetNamespace()); err != nil {
						o.log.Warning("", items.ScopeVelero, fmt.Sprintf("%s: looking up namespace %s: %v", a.Name(), item.GetNamespace(), err))
						continue
					}
					namespaces[item.GetNamespace()] = exists
				}
				if !exists {
					o.log.Info("Not taken: the source cluster has no such namespace", "action", a.Name(), "item", what)
					continue
				}
				if served(r) {
					found, err := has(ctx, r.GVR, item.GetNamespace(), item.GetName())
					if err != nil {
						o.log.Warning("", items.ScopeVelero, fmt.Sprintf("%s: looking up %s: %v", a.Name(), what, err))
						continue
					}
					if !found {
						o.log.Info("Not taken: the source cluster serves this resource and has no such object", "action", a.Name(), "item", what)
						continue
					}
				}
			}
			o.start(ctx, r, item)
		}
	}
}

// startedFor reports whether an operation was started for the item.
func (o *operations) startedFor(r items.Resource, item *unstructured.Unstructured) bool {
	for _, op := range o.list {
		id := op.Spec.ResourceIdentifier
		if id.Group == r.GVR.Group && id.Resource == r.GVR.Resource && id.Namespace == item.GetNamespace() && id.Name == item.GetName() {
			return true
		}
	}
	return false
}

// counts returns operations attempted, completed and failed.
func (o *operations) counts() (attempted, completed, failed int) {
	for _, op := range o.list {
		switch op.Status.Phase {
		case OperationPhaseCompleted:
			completed++
		case OperationPhaseFailed:
			failed++
		}
	}
	return len(o.list), completed, failed
}

// poll updates every unfinished operation once; one past timeout (from
// its creation) is cancelled and failed, as Velero does.
func (o *operations) poll(ctx context.Context, timeout time.Duration) {
	for _, op := range o.list {
		if op.done() {
			continue
		}
		a := o.byName[op.Spec.BackupItemAction]
		now := metav1.NewTime(o.clock.Now())
		op.Status.Updated = &now
		if a == nil {
			// Recorded by another process (a resumed backup).
			o.failOp(op, fmt.Sprintf("this server has no backup item action %s", op.Spec.BackupItemAction))
			continue
		}
		if timeout > 0 && now.Sub(op.Status.Created.Time) > timeout {
			if err := a.Cancel(ctx, o.backup, op.Spec.OperationID); err != nil {
				o.log.Warning(op.Spec.ResourceIdentifier.Namespace, "", fmt.Sprintf("%s: cancelling timed-out operation %s: %v", a.Name(), op.Spec.OperationID, err))
			}
			o.failOp(op, fmt.Sprintf("the operation timed out after %s (itemOperationTimeout)", timeout))
			continue
		}
		p, err := a.Progress(ctx, o.backup, op.Spec.OperationID)
		if err != nil {
			if ctx.Err() == nil {
				o.failOp(op, fmt.Sprintf("reading its progress: %v", err))
			}
			continue
		}
		op.Status.NCompleted, op.Status.NTotal, op.Status.OperationUnits, op.Status.Description = p.NCompleted, p.NTotal, p.OperationUnits, p.Description
		switch {
		case p.Completed && p.Err != "":
			o.failOp(op, p.Err)
		case p.Completed:
			op.Status.Phase = OperationPhaseCompleted
			o.log.Info("Async operation completed", "action", a.Name(), "operationID", op.Spec.OperationID)
		}
	}
}

func (o *operations) failOp(op *BackupOperation, msg string) {
	op.Status.Phase, op.Status.Error = OperationPhaseFailed, msg
	id := op.Spec.ResourceIdentifier
	o.log.Error(id.Namespace, "", fmt.Sprintf("%s: async operation %s for %s.%s %s failed: %s",
		op.Spec.BackupItemAction, op.Spec.OperationID, id.Resource, id.Group, qualified(id.Namespace, id.Name), msg))
}

// pending reports whether any operation is still running.
func (o *operations) pending() bool {
	for _, op := range o.list {
		if !op.done() {
			return true
		}
	}
	return false
}

// record adds a running operation of action a for the item id.
func (o *operations) record(a ItemAction, started Started, id ResourceIdentifier) {
	now := metav1.NewTime(o.clock.Now())
	o.list = append(o.list, &BackupOperation{
		Spec: BackupOperationSpec{
			BackupName: o.backup.Name, BackupUID: string(o.backup.UID), BackupItemAction: a.Name(), OperationID: started.OperationID,
			ResourceIdentifier: id, PostOperationItems: started.PostOperationItems,
		},
		Status: OperationStatus{Phase: OperationPhaseInProgress, Created: &now, Started: &now, Updated: &now},
	})
}

// find adds the operations the actions find in the source cluster
// (OperationFinder) that the list does not hold yet: not the same
// operation ID, nor the same resource, of the same action.
func (o *operations) find(ctx context.Context) {
	for _, a := range o.actions {
		f, ok := a.(OperationFinder)
		if !ok {
			continue
		}
		found, err := f.StartedOperations(ctx, o.backup)
		if err != nil {
			o.log.Warning("", items.ScopeVelero, fmt.Sprintf("%s: finding the operations the backup started: %v", a.Name(), err))
			continue
		}
		for _, started := range found {
			if started.OperationID == "" || started.Resource == nil {
				continue
			}
			if slices.ContainsFunc(o.list, func(op *BackupOperation) bool {
				return op.Spec.BackupItemAction == a.Name() && (op.Spec.OperationID == started.OperationID || op.Spec.ResourceIdentifier == *started.Resource)
			}) {
				continue
			}
			o.record(a, started, *started.Resource)
			o.log.Info("Found an async operation the backup started", "action", a.Name(), "operationID", started.OperationID)
		}
	}
}

// cancelAll cancels the unfinished operations (the backup was cancelled
// or deleted, or the server found them after a restart), and discards
// what the ended ones of an OperationFinisher made.
func (o *operations) cancelAll(ctx context.Context, why string) {
	for _, op := range o.list {
		a := o.byName[op.Spec.BackupItemAction]
		if op.done() {
			// What an ended operation made is the backup's no more.
			if f, ok := a.(OperationFinisher); ok {
				if err := f.Discard(ctx, o.backup, op); err != nil {
					o.log.Warning(op.Spec.ResourceIdentifier.Namespace, "", fmt.Sprintf("%s: removing what operation %s made: %v", a.Name(), op.Spec.OperationID, err))
				}
			}
			continue
		}
		if a == nil {
			o.failOp(op, fmt.Sprintf("%s; no action %q in this server to cancel it", why, op.Spec.BackupItemAction))
			continue
		}
		if err := a.Cancel(ctx, o.backup, op.Spec.OperationID); err != nil {
			o.failOp(op, fmt.Sprintf("%s; cancelling it: %v", why, err))
			continue
		}
		o.failOp(op, why)
	}
}

// json is the item operations file.
func (o *operations) json() ([]byte, error) {
	list := o.list
	if list == nil {
		list = []*BackupOperation{}
	}
	return json.Marshal(list)
}

// load reads an item operations file back (after a restart).
func (o *operations) load(data []byte) error {
	if err := json.Unmarshal(data, &o.list); err != nil {
		return fmt.Errorf("decoding the item operations: %w", err)
	}
	return nil
}

// wait polls the operations every interval until none is running or
// runCtx ends (then its cause is returned); progress is called after
// each round.
func (o *operations) wait(runCtx context.Context, interval, timeout time.Duration, progress func()) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for o.pending() {
		select {
		case <-runCtx.Done():
			return context.Cause(runCtx)
		case <-t.C:
		}
		o.poll(runCtx, timeout)
		progress()
	}
	return nil
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
