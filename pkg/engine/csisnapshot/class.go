package csisnapshot

import (
	"context"
	"fmt"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// snapshotClass chooses the VolumeSnapshotClass of a claim of driver, as
// Velero does: the class the claim's annotation names, else the one the
// backup's annotation names for the driver, else the driver's class
// labelled ClassSelector, else its default class, else its only class.
// A named class that does not exist or is another driver's is passed
// over (Velero logs it at debug level only); the error of a driver
// without a class says how to mark one.
func (a Action) snapshotClass(ctx context.Context, b *velerov1.Backup, pvc *corev1.PersistentVolumeClaim, driver string) (string, error) {
	list, err := a.Snapshots.SnapshotV1().VolumeSnapshotClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing VolumeSnapshotClasses: %w", err)
	}
	return chooseClass(list.Items, claimClass(b, pvc), b.Annotations[ClassSelector+"_"+strings.ToLower(driver)], driver)
}

// claimClass is the class a claim's annotation names, unless the backup is
// a tenant's (made for a NonAdminBackup or NonAdminSchedule): a class is
// cluster-scoped, the admin's to choose (the class labelled ClassSelector,
// else the default), and a tenant's claim does not choose another.
func claimClass(b *velerov1.Backup, pvc *corev1.PersistentVolumeClaim) string {
	if oadpv1alpha1.OriginNamespace(b.Annotations) != "" {
		return ""
	}
	return pvc.Annotations[ClassSelector]
}

// chooseClass is snapshotClass's choice among classes.
func chooseClass(classes []snapshotv1.VolumeSnapshotClass, forClaim, forBackup, driver string) (string, error) {
	named := func(name string) (string, bool) {
		for _, c := range classes {
			if strings.EqualFold(c.Name, name) && strings.EqualFold(c.Driver, driver) {
				return c.Name, true
			}
		}
		return "", false
	}
	for _, name := range []string{forClaim, forBackup} {
		if name == "" {
			continue
		}
		if c, ok := named(name); ok {
			return c, nil
		}
	}
	var ofDriver []snapshotv1.VolumeSnapshotClass
	for _, c := range classes {
		if c.Driver == driver {
			ofDriver = append(ofDriver, c)
		}
	}
	for _, c := range ofDriver {
		if _, ok := c.Labels[ClassSelector]; ok {
			return c.Name, nil
		}
	}
	for _, c := range ofDriver {
		if _, ok := c.Annotations[DefaultClassAnnotation]; ok {
			return c.Name, nil
		}
	}
	if len(ofDriver) == 1 {
		return ofDriver[0].Name, nil
	}
	return "", fmt.Errorf("failed to get VolumeSnapshotClass for provisioner %s: ensure that the desired VolumeSnapshotClass has the %s label or %s annotation, and that its driver matches the StorageClass provisioner",
		driver, ClassSelector, DefaultClassAnnotation)
}
