package verify

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/rootdir"
	"github.com/backstop-io/backstop/pkg/vmchain"
	"github.com/backstop-io/backstop/pkg/vmmanifest"
	"github.com/backstop-io/backstop/pkg/vmrestore"
)

// VMChains checks the disk chains of the VM backups a backup made
// (VirtualMachineBackups labelled with its UID, package vmoperation) that
// completed: each one's chain (the full backup and the incrementals up to
// it, in volumeRoot) is checked as a restore of it would check it before
// writing anything. A backup with VM backups and a server without a volume
// root (where restores could not read them either) is a problem.
func VMChains(ctx context.Context, client versioned.Interface, volumeRoot string, b *velerov1.Backup, r *Report) error {
	list, err := client.BackupV1alpha1().VirtualMachineBackups("").List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{velerov1.BackupUIDLabel: string(b.UID)}.String()})
	if err != nil {
		return fmt.Errorf("listing the VM backups of backup %s: %w", b.Name, err)
	}
	vmbs := list.Items
	sort.Slice(vmbs, func(i, j int) bool {
		return vmbs[i].Namespace+"/"+vmbs[i].Name < vmbs[j].Namespace+"/"+vmbs[j].Name
	})
	for i := range vmbs {
		vmb := &vmbs[i]
		if vmb.State() != kv.BackupComplete {
			continue
		}
		what := fmt.Sprintf("VM backup %s/%s", vmb.Namespace, vmb.Name)
		if volumeRoot == "" {
			r.Problem("%s: this server has no volume root to read VM disk backups from", what)
			continue
		}
		disks, err := vmChain(ctx, rootdir.Dir(volumeRoot), vmb)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.Problem("%s: %v", what, err)
			continue
		}
		r.VMDiskChains += disks
	}
	return nil
}

// vmChain checks one VM backup's chain and returns how many disks it has.
func vmChain(ctx context.Context, volumes rootdir.Dir, vmb *kv.VirtualMachineBackup) (int, error) {
	if vmb.Spec.PvcName == nil {
		return 0, fmt.Errorf("it names no volume")
	}
	dir, err := volumes.Join(vmb.Namespace, *vmb.Spec.PvcName, vmb.Name)
	if err != nil {
		return 0, err
	}
	nsDir, err := volumes.Join(vmb.Namespace)
	if err != nil {
		return 0, err
	}
	m, err := vmmanifest.Read(dir)
	if err != nil {
		return 0, fmt.Errorf("its files are not on this host: %w", err)
	}
	links, err := vmchain.Links(nsDir, m.Domain)
	if err != nil {
		return 0, err
	}
	chain, err := vmchain.Chain(links, dir)
	if err != nil {
		return 0, err
	}
	return vmrestore.CheckChain(ctx, chain)
}
