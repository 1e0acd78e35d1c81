// Package configuration keeps the admin namespace's storage locations,
// snapshot locations, schedules and the tenants' policy (a
// DataProtectionApplication) as a directory of manifests says: the Helm
// chart's configuration.backupStorageLocation,
// configuration.volumeSnapshotLocation, schedules and nonAdmin.policy,
// rendered into a
// ConfigMap the server's pod mounts (--configuration-dir). Helm cannot
// make these objects itself: they are served by the server it installs,
// which does not run yet when Helm writes. At every start of the engines
// the objects are applied (server-side apply, as FieldManager, forced),
// labelled as the configuration's, and those labelled so that the
// directory no longer holds are deleted: the directory is what the
// release's values say, as Helm keeps the objects it makes. Objects made
// otherwise (kubectl, the velero CLI) are left alone unless the directory
// names them.
package configuration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	applyoadp "github.com/backstop-io/backstop/pkg/generated/applyconfiguration/oadp/v1alpha1"
	applyv1 "github.com/backstop-io/backstop/pkg/generated/applyconfiguration/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
)

const (
	// Label marks the objects the configuration made, with LabelValue.
	Label      = "backstop.io/configuration"
	LabelValue = "managed"
	// FieldManager is the configuration's field manager.
	FieldManager = "backstop-configuration"
)

// The kinds a configuration holds (velero.io/v1).
const (
	KindStorageLocation  = "BackupStorageLocation"
	KindSnapshotLocation = "VolumeSnapshotLocation"
	KindSchedule         = "Schedule"
)

// KindPolicy is the tenants' policy (oadp.openshift.io/v1alpha1).
const KindPolicy = "DataProtectionApplication"

// kinds are the kinds a configuration holds, by API version.
var kinds = map[string][]string{
	velerov1.SchemeGroupVersion.String():     {KindStorageLocation, KindSnapshotLocation, KindSchedule},
	oadpv1alpha1.SchemeGroupVersion.String(): {KindPolicy},
}

// Object is one object of a configuration, as its manifest says.
type Object struct {
	Kind, Name string
	// Source is the file it is read from.
	Source string
	// manifest is the object as JSON.
	manifest []byte
}

// Read reads the objects of a configuration: the documents of every
// .yaml, .yml and .json file in dir (not below it; the names a ConfigMap
// volume keeps for itself, beginning with "..", are not its files). Every
// document is a velero.io/v1 BackupStorageLocation, VolumeSnapshotLocation
// or Schedule with a name, of the namespace given or of none; two of one
// kind and name are refused. Any error fails the whole read: a
// configuration is applied whole or not at all, never pruned by what a
// broken file hides.
func Read(dir, namespace string) ([]Object, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration %s: %w", dir, err)
	}
	var objs []Object
	seen := map[[2]string]string{}
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if strings.HasPrefix(name, "..") || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading the configuration: %w", err)
		}
		read, err := decode(data, name, namespace)
		if err != nil {
			return nil, err
		}
		for _, o := range read {
			key := [2]string{o.Kind, o.Name}
			if first, ok := seen[key]; ok {
				return nil, fmt.Errorf("%s: %s %q is also in %s", o.Source, o.Kind, o.Name, first)
			}
			seen[key] = o.Source
			objs = append(objs, o)
		}
	}
	return objs, nil
}

// decode reads the documents of one file.
func decode(data []byte, source, namespace string) ([]Object, error) {
	var objs []Object
	reader := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 1; ; i++ {
		var doc map[string]any
		if err := reader.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s, document %d: %w", source, i, err)
		}
		if len(doc) == 0 {
			continue
		}
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		}
		manifest, err := json.Marshal(doc)
		if err == nil {
			err = json.Unmarshal(manifest, &head)
		}
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s, document %d: %w", source, i, err)
		case !slices.Contains(kinds[head.APIVersion], head.Kind):
			return nil, fmt.Errorf("%s, document %d: %s %s is not a configuration's kind (%s %s, %s %s)", source, i, head.APIVersion, head.Kind,
				velerov1.SchemeGroupVersion, strings.Join(kinds[velerov1.SchemeGroupVersion.String()], ", "),
				oadpv1alpha1.SchemeGroupVersion, KindPolicy)
		case head.Metadata.Name == "":
			return nil, fmt.Errorf("%s, document %d: a %s without a name", source, i, head.Kind)
		case head.Metadata.Namespace != "" && head.Metadata.Namespace != namespace:
			return nil, fmt.Errorf("%s, document %d: %s %q of namespace %q: a configuration's objects are the admin namespace's (%s)",
				source, i, head.Kind, head.Metadata.Name, head.Metadata.Namespace, namespace)
		}
		objs = append(objs, Object{Kind: head.Kind, Name: head.Metadata.Name, Source: source, manifest: manifest})
	}
}

// Apply applies objs in namespace and deletes the objects of the
// configuration's kinds labelled as its own that objs do not hold. Each
// object is applied on its own: one the server refuses (its validation)
// is reported with the others and the rest are applied; it is not deleted.
func Apply(ctx context.Context, client versioned.Interface, namespace string, objs []Object) error {
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	v1, oadp := client.VeleroV1(), client.OadpV1alpha1()
	var errs []error
	for _, o := range objs {
		var err error
		switch o.Kind {
		case KindStorageLocation:
			err = applyAs(o, func(ac *applyv1.BackupStorageLocationApplyConfiguration) error {
				_, err := v1.BackupStorageLocations(namespace).Apply(ctx, ac.WithNamespace(namespace).WithLabels(map[string]string{Label: LabelValue}), opts)
				return err
			})
		case KindSnapshotLocation:
			err = applyAs(o, func(ac *applyv1.VolumeSnapshotLocationApplyConfiguration) error {
				_, err := v1.VolumeSnapshotLocations(namespace).Apply(ctx, ac.WithNamespace(namespace).WithLabels(map[string]string{Label: LabelValue}), opts)
				return err
			})
		case KindSchedule:
			err = applyAs(o, func(ac *applyv1.ScheduleApplyConfiguration) error {
				_, err := v1.Schedules(namespace).Apply(ctx, ac.WithNamespace(namespace).WithLabels(map[string]string{Label: LabelValue}), opts)
				return err
			})
		case KindPolicy:
			err = applyAs(o, func(ac *applyoadp.DataProtectionApplicationApplyConfiguration) error {
				_, err := oadp.DataProtectionApplications(namespace).Apply(ctx, ac.WithNamespace(namespace).WithLabels(map[string]string{Label: LabelValue}), opts)
				return err
			})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q (%s): %w", o.Kind, o.Name, o.Source, err))
			continue
		}
		klog.V(2).InfoS("Applied the configuration's object", "kind", o.Kind, "name", o.Name, "source", o.Source)
	}
	keep := map[[2]string]bool{}
	for _, o := range objs {
		keep[[2]string{o.Kind, o.Name}] = true
	}
	selector := metav1.ListOptions{LabelSelector: Label + "=" + LabelValue}
	prune := func(kind string, names []string, del func(string) error) {
		for _, name := range names {
			if keep[[2]string{kind, name}] {
				continue
			}
			if err := del(name); err != nil {
				errs = append(errs, fmt.Errorf("deleting %s %q, which the configuration no longer holds: %w", kind, name, err))
				continue
			}
			klog.InfoS("Deleted an object the configuration no longer holds", "kind", kind, "name", name)
		}
	}
	del := metav1.DeleteOptions{}
	if list, err := v1.BackupStorageLocations(namespace).List(ctx, selector); err != nil {
		errs = append(errs, err)
	} else {
		prune(KindStorageLocation, names(list.Items, func(o velerov1.BackupStorageLocation) string { return o.Name }), func(n string) error {
			return v1.BackupStorageLocations(namespace).Delete(ctx, n, del)
		})
	}
	if list, err := v1.VolumeSnapshotLocations(namespace).List(ctx, selector); err != nil {
		errs = append(errs, err)
	} else {
		prune(KindSnapshotLocation, names(list.Items, func(o velerov1.VolumeSnapshotLocation) string { return o.Name }), func(n string) error {
			return v1.VolumeSnapshotLocations(namespace).Delete(ctx, n, del)
		})
	}
	if list, err := v1.Schedules(namespace).List(ctx, selector); err != nil {
		errs = append(errs, err)
	} else {
		prune(KindSchedule, names(list.Items, func(o velerov1.Schedule) string { return o.Name }), func(n string) error {
			return v1.Schedules(namespace).Delete(ctx, n, del)
		})
	}
	if list, err := oadp.DataProtectionApplications(namespace).List(ctx, selector); err != nil {
		errs = append(errs, err)
	} else {
		prune(KindPolicy, names(list.Items, func(o oadpv1alpha1.DataProtectionApplication) string { return o.Name }), func(n string) error {
			return oadp.DataProtectionApplications(namespace).Delete(ctx, n, del)
		})
	}
	return errors.Join(errs...)
}

// applyAs decodes o into its apply configuration and applies it.
func applyAs[T any](o Object, apply func(*T) error) error {
	ac := new(T)
	if err := json.Unmarshal(o.manifest, ac); err != nil {
		return err
	}
	return apply(ac)
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, name(it))
	}
	return out
}

// HasStorageLocation reports whether objs hold a storage location: the
// server then makes no default location of its own.
func HasStorageLocation(objs []Object) bool {
	return slices.ContainsFunc(objs, func(o Object) bool { return o.Kind == KindStorageLocation })
}
