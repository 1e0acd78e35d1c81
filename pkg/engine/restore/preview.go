package restore

// A restore's preview: the restore's own run (the same filters, order,
// namespace mapping, resource modifiers, restore actions and existing
// resource policy) against a target that takes every write as a
// server-side dry run, each item's outcome recorded instead of the run's
// status, and nothing done that a dry run cannot undo (namespaces, VM
// disks, the data mover's downloads, owner references are said, not done).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/restoreaction"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// ErrInvalid wraps what keeps a restore from running (its backup missing,
// its resource modifiers bad): a preview answers it as the restore's
// FailedValidation would say it.
var ErrInvalid = errors.New("the restore cannot run")

// Preview says what restore r would do, writing nothing. backups and
// locations are read as the restore engine reads them (its informers'
// listers, or listers over one read of the API: NewPreviewer).
func (c *Controller) Preview(ctx context.Context, r *velerov1.Restore) (*velerov1.RestorePreview, error) {
	backup, problems := c.validate(r)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	mods, problem, err := c.modifiersOf(ctx, r)
	if err != nil {
		return nil, err
	}
	if problem != "" {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, problem)
	}
	target, as, err := c.targetOf(r)
	if err != nil {
		return nil, err
	}
	run := &restoreRun{c: c, r: r, backup: backup, modifiers: mods, count: &counter{}, namespaces: map[string]bool{},
		as: as, preview: &preview{}}
	run.target = run.writes(target)
	logger := klog.FromContext(ctx).WithValues("restorePreview", klog.KObj(r), "backup", backup.Name)
	log, err := items.NewLog(c.cfg.ScratchDir, c.cfg.Clock, logger, "restore", r.Namespace+"/"+r.Name)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	run.log = log
	if reason := run.asTenant(); reason != "" {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, reason)
	}
	if err := run.openLocation(ctx); err != nil {
		return nil, err
	}
	if err := run.restore(ctx); err != nil {
		return nil, err
	}
	return run.preview.result(log), nil
}

// NewPreviewer returns a restore engine that previews only (Preview),
// reading backups and locations through the listers given (not an
// informer's: a replica that does not run the engines previews too).
func NewPreviewer(cfg Config, backups listers.BackupLister, locations listers.BackupStorageLocationLister) *Controller {
	if cfg.Actions == nil {
		cfg.Actions = restoreaction.Default()
	}
	if cfg.ItemWorkers < 1 {
		cfg.ItemWorkers = DefaultItemWorkers
	}
	return &Controller{cfg: cfg, backups: backups, locations: locations}
}

// ListersOnce are listers over one read of the backups and storage
// locations of namespace: what a preview reads, without informers.
func ListersOnce(ctx context.Context, cfg Config, namespace string) (listers.BackupLister, listers.BackupStorageLocationLister, error) {
	backups, err := cfg.Client.VeleroV1().Backups(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing backups: %w", err)
	}
	locations, err := cfg.Client.VeleroV1().BackupStorageLocations(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing storage locations: %w", err)
	}
	bi := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range backups.Items {
		if err := bi.Add(&backups.Items[i]); err != nil {
			return nil, nil, err
		}
	}
	li := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range locations.Items {
		if err := li.Add(&locations.Items[i]); err != nil {
			return nil, nil, err
		}
	}
	return listers.NewBackupLister(bi), listers.NewBackupStorageLocationLister(li), nil
}

// storedPreviewObjectBytes bounds the objects shown by a preview kept in a
// stored Restore (spec.preview), well within what etcd takes of an object.
const storedPreviewObjectBytes = 256 << 10

// preview gathers what a previewed restore would do.
type preview struct {
	mu          sync.Mutex
	items       []velerov1.RestorePreviewItem
	counts      map[[2]string]*velerov1.RestorePreviewCount
	volumes     []velerov1.RestorePreviewVolume
	objectBytes int
	// objectLimit bounds objectBytes (0: MaxPreviewObjectBytes).
	objectLimit int
	truncated   bool
	// created are the namespaces the restore would create.
	created map[string]bool
}

// record records an item's outcome; obj is the item as the target
// answered its dry run (Create, Update).
func (p *preview) record(resource, namespace, name, action, reason string, obj *unstructured.Unstructured) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.counts == nil {
		p.counts = map[[2]string]*velerov1.RestorePreviewCount{}
	}
	key := [2]string{resource, namespace}
	c := p.counts[key]
	if c == nil {
		c = &velerov1.RestorePreviewCount{Resource: resource, Namespace: namespace}
		p.counts[key] = c
	}
	switch action {
	case velerov1.PreviewCreate:
		c.Create++
	case velerov1.PreviewUpdate:
		c.Update++
	case velerov1.PreviewSkip:
		c.Skip++
	case velerov1.PreviewRefuse:
		c.Refuse++
	}
	if len(p.items) >= velerov1.MaxPreviewItems {
		p.truncated = true
		return
	}
	item := velerov1.RestorePreviewItem{Resource: resource, Namespace: namespace, Name: name, Action: action, Reason: reason}
	limit := p.objectLimit
	if limit == 0 {
		limit = velerov1.MaxPreviewObjectBytes
	}
	if obj != nil && p.objectBytes < limit {
		obj = obj.DeepCopy()
		obj.SetManagedFields(nil)
		if data, err := obj.MarshalJSON(); err == nil && p.objectBytes+len(data) <= limit {
			p.objectBytes += len(data)
			item.Object = &runtime.RawExtension{Raw: data}
		}
	}
	p.items = append(p.items, item)
}

// namespaceCreated records a namespace the restore would create, once;
// it reports whether it was new.
func (p *preview) namespaceCreated(name string) bool {
	p.mu.Lock()
	if p.created == nil {
		p.created = map[string]bool{}
	}
	isNew := !p.created[name]
	p.created[name] = true
	p.mu.Unlock()
	return isNew
}

// willCreate: name is a namespace the restore would create (whose items a
// dry run cannot check: it does not exist).
func (p *preview) willCreate(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.created[name]
}

func (p *preview) volume(v velerov1.RestorePreviewVolume) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.volumes = append(p.volumes, v)
}

func (p *preview) result(log *items.Log) *velerov1.RestorePreview {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &velerov1.RestorePreview{Items: p.items, Volumes: p.volumes, Truncated: p.truncated}
	for _, c := range p.counts {
		out.Summary = append(out.Summary, *c)
	}
	sort.Slice(out.Summary, func(i, j int) bool {
		a, b := out.Summary[i], out.Summary[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Resource < b.Resource
	})
	out.Errors, out.Warnings = log.Messages(velerov1.MaxPreviewMessages)
	return out
}

// record records an item's outcome when the run is a preview.
func (run *restoreRun) record(resource, namespace, name, action, reason string, obj *unstructured.Unstructured) {
	if run.preview != nil {
		run.preview.record(resource, namespace, name, action, reason, obj)
	}
}

// previewVolumes says which volumes' data the restore would write: the
// data mover's claims and the VMs' disks (which a preview does not touch).
func (run *restoreRun) previewVolumes(ctx context.Context, spec *velerov1.BackupSpec, resources []items.Resource) error {
	run.mu.Lock()
	moved := append([]movedClaim(nil), run.moved...)
	run.mu.Unlock()
	for _, m := range moved {
		run.preview.volume(velerov1.RestorePreviewVolume{Kind: "PersistentVolumeClaim", Namespace: m.namespace, Name: m.name,
			Source: fmt.Sprintf("the data mover (a DataDownload from the backup's repository, snapshot %s)", m.snapshotID)})
	}
	vms, err := run.vmsTaken(ctx, spec, resources)
	if err != nil {
		return err
	}
	for _, vm := range vms {
		run.preview.volume(velerov1.RestorePreviewVolume{Kind: "VirtualMachine", Namespace: vm.target, Name: vm.name,
			Source: fmt.Sprintf("the disk chain of VM backup %s/%s", vm.backup.Namespace, vm.backup.Name)})
	}
	return nil
}

// writes is the client the run writes the target with: d, or, for a
// preview, d taking every write as a dry run. Every client the run writes
// the target with goes through it.
func (run *restoreRun) writes(d dynamic.Interface) dynamic.Interface {
	if run.preview != nil {
		return dryRun{d}
	}
	return d
}

// dryRun is a target that takes every write as a server-side dry run
// (reads pass through).
type dryRun struct{ dynamic.Interface }

func (d dryRun) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return dryRunResource{d.Interface.Resource(gvr)}
}

type dryRunResource struct {
	dynamic.NamespaceableResourceInterface
}

func (d dryRunResource) Namespace(ns string) dynamic.ResourceInterface {
	return dryRunNamespaced{d.NamespaceableResourceInterface.Namespace(ns)}
}

func (d dryRunResource) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	return dryRunNamespaced{d.NamespaceableResourceInterface}.Create(ctx, obj, opts, sub...)
}

func (d dryRunResource) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	return dryRunNamespaced{d.NamespaceableResourceInterface}.Update(ctx, obj, opts, sub...)
}

func (d dryRunResource) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return dryRunNamespaced{d.NamespaceableResourceInterface}.UpdateStatus(ctx, obj, opts)
}

func (d dryRunResource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	return dryRunNamespaced{d.NamespaceableResourceInterface}.Delete(ctx, name, opts, sub...)
}

func (d dryRunResource) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, list metav1.ListOptions) error {
	return dryRunNamespaced{d.NamespaceableResourceInterface}.DeleteCollection(ctx, opts, list)
}

func (d dryRunResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	return dryRunNamespaced{d.NamespaceableResourceInterface}.Patch(ctx, name, pt, data, opts, sub...)
}

func (d dryRunResource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, sub ...string) (*unstructured.Unstructured, error) {
	return dryRunNamespaced{d.NamespaceableResourceInterface}.Apply(ctx, name, obj, opts, sub...)
}

func (d dryRunResource) ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	return dryRunNamespaced{d.NamespaceableResourceInterface}.ApplyStatus(ctx, name, obj, opts)
}

type dryRunNamespaced struct{ dynamic.ResourceInterface }

var dryRunAll = []string{metav1.DryRunAll}

func (d dryRunNamespaced) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	opts.DryRun = dryRunAll
	return d.ResourceInterface.Create(ctx, obj, opts, sub...)
}

func (d dryRunNamespaced) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	opts.DryRun = dryRunAll
	return d.ResourceInterface.Update(ctx, obj, opts, sub...)
}

func (d dryRunNamespaced) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	opts.DryRun = dryRunAll
	return d.ResourceInterface.UpdateStatus(ctx, obj, opts)
}

func (d dryRunNamespaced) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	opts.DryRun = dryRunAll
	return d.ResourceInterface.Delete(ctx, name, opts, sub...)
}

func (d dryRunNamespaced) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, list metav1.ListOptions) error {
	opts.DryRun = dryRunAll
	return d.ResourceInterface.DeleteCollection(ctx, opts, list)
}

func (d dryRunNamespaced) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	opts.DryRun = dryRunAll
	return d.ResourceInterface.Patch(ctx, name, pt, data, opts, sub...)
}

func (d dryRunNamespaced) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, sub ...string) (*unstructured.Unstructured, error) {
	opts.DryRun = dryRunAll
	return d.ResourceInterface.Apply(ctx, name, obj, opts, sub...)
}

func (d dryRunNamespaced) ApplyStatus(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	opts.DryRun = dryRunAll
	return d.ResourceInterface.ApplyStatus(ctx, name, obj, opts)
}

// recordUncheckable records an item of a namespace the restore would
// create, which the target cannot check (the namespace is not there): it
// would be created; but the ServiceAccount "default", which the cluster
// makes in every new namespace, would be found there.
func (run *restoreRun) recordUncheckable(resource string, obj *unstructured.Unstructured) {
	if resource == "serviceaccounts" && obj.GetName() == "default" {
		action := velerov1.PreviewSkip
		if run.r.Spec.ExistingResourcePolicy == velerov1.PolicyTypeUpdate {
			action = velerov1.PreviewUpdate
		}
		run.record(resource, obj.GetNamespace(), obj.GetName(), action,
			"the cluster makes it in every new namespace: the restore finds it there", nil)
		return
	}
	run.record(resource, obj.GetNamespace(), obj.GetName(), velerov1.PreviewCreate,
		fmt.Sprintf("not checked by the target: namespace %s does not exist yet", obj.GetNamespace()), obj)
}

// notCheckable: err is a dry run's NotFound for an item of a namespace the
// restore would create (it does not exist, so the target cannot check the
// item).
func (run *restoreRun) notCheckable(err error, namespace string) bool {
	return run.preview != nil && apierrors.IsNotFound(err) && namespace != "" && run.preview.willCreate(namespace)
}
