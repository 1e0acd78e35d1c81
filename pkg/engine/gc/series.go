package gc

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/vmoperation"
)

// seriesKeys maps a Schedule, a Backup of a schedule, or a schedule's
// series tracker to the schedule (in the admin namespace), whose series
// is looked at.
func (c *Controller) seriesKeys(obj any) []cache.ObjectName {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	switch o := obj.(type) {
	case *velerov1.Schedule:
		return []cache.ObjectName{{Namespace: o.Namespace, Name: o.Name}}
	case *velerov1.Backup:
		if s := o.Labels[velerov1.ScheduleNameLabel]; s != "" {
			return []cache.ObjectName{{Namespace: o.Namespace, Name: s}}
		}
	case *kv.VirtualMachineBackupTracker:
		if s := o.Labels[velerov1.ScheduleNameLabel]; s != "" && o.Labels[vmoperation.SeriesLabel] != "" {
			return []cache.ObjectName{{Namespace: c.adminNamespace, Name: s}}
		}
	}
	return nil
}

// syncSeries deletes the VM backup trackers of a schedule's series once
// the schedule is deleted and its last backup is gone (the changed block
// tracking engine then turns tracking off for VMs no other tracker
// selects). While either remains, they stay: a later backup of the
// series, or the restore of an incremental, needs them.
func (c *Controller) syncSeries(ctx context.Context, key cache.ObjectName) error {
	if c.trackers == nil {
		return nil
	}
	if _, err := c.schedules.Schedules(key.Namespace).Get(key.Name); !apierrors.IsNotFound(err) {
		return err // there, or unknown
	}
	backups, err := c.backups.Backups(key.Namespace).List(labels.SelectorFromSet(labels.Set{velerov1.ScheduleNameLabel: velerov1.LabelValue(key.Name)}))
	if err != nil || len(backups) > 0 {
		return err
	}
	trackers, err := c.trackers.List(labels.SelectorFromSet(labels.Set{
		velerov1.ScheduleNameLabel: velerov1.LabelValue(key.Name), vmoperation.SeriesLabel: velerov1.LabelValue(key.Name)}))
	if err != nil {
		return err
	}
	for _, t := range trackers {
		if t.DeletionTimestamp != nil {
			continue
		}
		if err := reconcile.DeleteIfUnchanged(ctx, c.client.BackupV1alpha1().VirtualMachineBackupTrackers(t.Namespace).Delete, t.Name, t.UID); err != nil {
			return fmt.Errorf("tracker %s/%s of deleted schedule %s: %w", t.Namespace, t.Name, key.Name, err)
		}
		klog.FromContext(ctx).Info("Deleted the VM backup tracker of a deleted schedule whose backups are gone",
			"schedule", key.String(), "tracker", klog.KObj(t))
	}
	return nil
}
