package restore

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/engine/restoreaction"
	"github.com/backstop-io/backstop/pkg/engine/vmhost"
	"github.com/backstop-io/backstop/pkg/engine/vmoperation"
	"github.com/backstop-io/backstop/pkg/rootdir"
	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/vmchain"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
	"github.com/backstop-io/backstop/pkg/vmrestore"
)

// The disks of the VMs a restore takes. A backup takes the VMs of its
// namespaces (libvirt domains "<ns>_<name>", package vmoperation) as
// VirtualMachineBackups labelled with its UID: the restore takes those
// whose VM its filters take (namespaces, resources: excluding
// virtualmachines leaves them out; a label selector takes no discovered
// VM, which has no labels, as on the backup side). Once every item is
// restored, each VM's disks are restored from its VirtualMachineBackup's
// chain (the full backup and the incrementals up to it), checked as
// restore-vm-disk checks it, into the domain "<mapped namespace>_<name>":
// an existing one is stopped, loses its checkpoints, gets its disks
// written and is started again if it ran; a missing one (the VM was
// deleted, or namespaceMapping gives it a new namespace) is defined from
// the definition the backup saved, with disks of its own beside the old
// ones, and started. Each VM is one item operation of the restore
// (status.restoreItemOperations*); its result is in the restore's log, and
// in its results when it failed. A VirtualMachine item in the tarball (a
// source cluster that serves them) is restored as any other item where
// the target serves VirtualMachines, and skipped where it does not.

// vmGroupResource is the group resource of VirtualMachine items.
var vmGroupResource = vmoperation.VirtualMachines.GroupResource()

// vmItem is a VM the restore takes, and its backup.
type vmItem struct {
	namespace, name string // in the backup
	target          string // the namespace restored into
	backup          *kv.VirtualMachineBackup
}

// vmsTaken lists the VMs whose disks the restore takes, by namespace and
// name.
func (run *restoreRun) vmsTaken(ctx context.Context, spec *velerov1.BackupSpec, resources []items.Resource) ([]vmItem, error) {
	client := run.c.cfg.Client.BackupV1alpha1()
	list, err := client.VirtualMachineBackups("").List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{velerov1.BackupUIDLabel: string(run.backup.UID)}.String()})
	if err != nil {
		return nil, fmt.Errorf("listing the VM backups of backup %s: %w", run.backup.Name, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	vmResource := vmoperation.VirtualMachines
	for _, r := range resources {
		if r.GroupResource() == vmGroupResource {
			vmResource = r
		}
	}
	filter, err := items.NewFilter(spec, append(resources, vmResource))
	if err != nil {
		return nil, err
	}
	if !filter.IncludesResource(vmResource) {
		return nil, nil
	}
	var out []vmItem
	for i := range list.Items {
		b := &list.Items[i]
		vm := b.Spec.Source.Name
		if b.Spec.Source.Kind == "VirtualMachineBackupTracker" {
			t, err := client.VirtualMachineBackupTrackers(b.Namespace).Get(ctx, vm, metav1.GetOptions{})
			if err != nil {
				run.log.Error(b.Namespace, "", fmt.Sprintf("VM backup %s/%s: reading its tracker: %v", b.Namespace, b.Name, err))
				continue
			}
			vm = t.Spec.Source.Name
		}
		if !filter.IncludesNamespace(b.Namespace) || !filter.IncludesItem(nil) {
			continue
		}
		out = append(out, vmItem{namespace: b.Namespace, name: vm, target: restoreaction.MapNamespace(run.r, b.Namespace), backup: b})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].namespace != out[j].namespace {
			return out[i].namespace < out[j].namespace
		}
		return out[i].name < out[j].name
	})
	return out, nil
}

// RestoredImagesDir is the directory under the volume root that holds the
// images of domains a restore defines anew, by namespace (a name no
// namespace's volume directory can have).
const RestoredImagesDir = ".restored"

// restoreVMs restores the disks of the VMs the restore takes.
func (run *restoreRun) restoreVMs(ctx context.Context, spec *velerov1.BackupSpec, resources []items.Resource) error {
	vms, err := run.vmsTaken(ctx, spec, resources)
	if err != nil {
		return err
	}
	for _, vm := range vms {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		run.count.opsAttempted.Add(1)
		domain := vm.target + "_" + vm.name
		what := fmt.Sprintf("VirtualMachine %s/%s", vm.target, vm.name)
		msg, err := run.restoreVM(ctx, vm, domain)
		if err != nil {
			run.count.opsFailed.Add(1)
			run.log.Error(vm.target, "", fmt.Sprintf("restoring the disks of %s: %v", what, err), "domain", domain)
			continue
		}
		run.count.opsCompleted.Add(1)
		run.log.Info("VM disks restored", "virtualMachine", vm.target+"/"+vm.name, "domain", domain, "result", msg)
	}
	return nil
}

// restoreVM restores one VM's disks and says how.
func (run *restoreRun) restoreVM(ctx context.Context, vm vmItem, domain string) (string, error) {
	c := run.c
	if c.cfg.Virt == nil || c.cfg.VolumeRoot == "" {
		return "", fmt.Errorf("this server restores no VM disks (no libvirt connection or volume root)")
	}
	vmb := vm.backup
	if !meta.IsStatusConditionTrue(conditionsOf(vmb), string(kv.ConditionComplete)) {
		return "", fmt.Errorf("its VM backup %s/%s did not complete (%s)", vmb.Namespace, vmb.Name, vmb.State())
	}
	if vmb.Spec.PvcName == nil {
		return "", fmt.Errorf("its VM backup %s/%s names no volume", vmb.Namespace, vmb.Name)
	}
	// The VM restored into and the VM backed up (the same one, but under
	// namespaceMapping): no backup of either runs and their chain is not
	// edited while it is read and restored.
	unlock, err := run.lockVMs(ctx, vm.target+"/"+vm.name, vmb.Namespace+"/"+vm.name)
	if err != nil {
		return "", err
	}
	defer unlock()
	volumes := rootdir.Dir(c.cfg.VolumeRoot)
	dir, err := volumes.Join(vmb.Namespace, *vmb.Spec.PvcName, vmb.Name)
	if err != nil {
		return "", fmt.Errorf("its VM backup %s/%s: %w", vmb.Namespace, vmb.Name, err)
	}
	nsDir, err := volumes.Join(vmb.Namespace)
	if err != nil {
		return "", err
	}
	m, err := vmmanifest.Read(dir)
	if err != nil {
		return "", fmt.Errorf("the files of its VM backup %s/%s are not on this host: %w", vmb.Namespace, vmb.Name, err)
	}
	links, err := vmchain.Links(nsDir, m.Domain)
	if err != nil {
		return "", err
	}
	chain, err := vmchain.Chain(links, dir)
	if err != nil {
		return "", err
	}
	conn, err := c.cfg.Virt()
	if err != nil {
		return "", fmt.Errorf("libvirt: %w", err)
	}
	// The manifest is in a volume its namespace writes: the domain it
	// names must be the backed-up VM's, or a definition read for it could
	// be another namespace's VM's.
	if source := vmb.Namespace + "_" + vm.name; m.Domain != source {
		return "", fmt.Errorf("its VM backup %s/%s names domain %q, not the VM's %q", vmb.Namespace, vmb.Name, m.Domain, source)
	}
	definition := m.Definition
	if definition == "" {
		// A backup taken before definitions were saved: the backed-up
		// domain's own, while it exists.
		definition, _ = conn.DomainDefinition(m.Domain)
	}
	run.log.Info("Restoring VM disks", "virtualMachine", vm.target+"/"+vm.name, "domain", domain,
		"virtualMachineBackup", vmb.Namespace+"/"+vmb.Name, "chain", len(chain))
	// A new domain's images go to a directory of the server's under the
	// volume root, by the namespace restored into (a DNS label): never
	// where the definition's disks were.
	images := filepath.Join(c.cfg.VolumeRoot, RestoredImagesDir, vm.target)
	allowed := virt.Restorable{BootDirs: c.cfg.VMBootDirs, Networks: c.cfg.VMNetworks}
	if allowed.BootDirs == nil {
		allowed.BootDirs = virt.DefaultBootDirs
	}
	if allowed.Networks == nil {
		allowed.Networks = virt.DefaultNetworks
	}
	res, err := vmrestore.IntoDomain(ctx, conn, vmrestore.DomainRequest{Chain: chain, Domain: domain, Definition: definition,
		Allowed: allowed, ImageDir: images})
	if len(res.LeftOut) > 0 {
		run.log.Warning(vm.target, "", fmt.Sprintf("VirtualMachine %s/%s was defined without what its saved definition names of the host: %s",
			vm.target, vm.name, strings.Join(res.LeftOut, "; ")))
	}
	if err != nil {
		return "", err
	}
	var names []string
	for _, d := range chain {
		names = append(names, filepath.Base(d))
	}
	var disks []string
	for name, image := range res.Disks {
		disks = append(disks, name+"="+image)
	}
	sort.Strings(disks)
	how := "written into the existing domain"
	if res.Created {
		how = "written into a new domain"
	}
	state := "stopped, as it was"
	if res.Started {
		state = "running"
	}
	return fmt.Sprintf("%s from the chain %s (%s), identical to the chain; the domain is %s",
		how, strings.Join(names, " → "), strings.Join(disks, ", "), state), nil
}

// lockVMs takes the VMs' locks, waiting while a backup, a chain edit or
// another restore holds one.
func (run *restoreRun) lockVMs(ctx context.Context, vms ...string) (func(), error) {
	locks := run.c.cfg.VMLocks
	holder := vmhost.Holder{ID: string(run.r.UID), What: "restore " + run.r.Name, WaitReason: kv.ReasonWaitingForRestore}
	var taken []string
	unlock := func() {
		for _, vm := range taken {
			locks.Unlock(vm, holder)
		}
	}
	said := map[string]bool{}
	for _, vm := range vms {
		err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
			other, ok := locks.TryLock(vm, holder)
			if !ok && !said[vm] {
				said[vm] = true
				run.log.Info("Waiting for the VM", "virtualMachine", vm, "for", other.What)
			}
			return ok, nil
		})
		if err != nil {
			unlock()
			return nil, err
		}
		taken = append(taken, vm)
	}
	return unlock, nil
}

func conditionsOf(b *kv.VirtualMachineBackup) []metav1.Condition {
	if b.Status == nil {
		return nil
	}
	return b.Status.Conditions
}
