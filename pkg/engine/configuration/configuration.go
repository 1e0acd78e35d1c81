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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
		// As applied: in the namespace, with the configuration's label
		// beside the manifest's own.
		metadata, _ := doc["metadata"].(map[string]any)
		labels, _ := metadata["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
		}
		labels[Label] = LabelValue
		metadata["labels"], metadata["namespace"] = labels, namespace
		if manifest, err = json.Marshal(doc); err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", source, i, err)
		}
		objs = append(objs, Object{Kind: head.Kind, Name: head.Metadata.Name, Source: source, manifest: manifest})
	}
}

// Apply applies objs in namespace and deletes the objects of the
// configuration's kinds labelled as its own that objs do not hold. Each
// object is applied on its own: one the server refuses (its validation)
// is reported with the others and the rest are applied; it is not deleted.
func Apply(ctx context.Context, client versioned.Interface, namespace string, objs []Object) error {
	v1, oadp := client.VeleroV1(), client.OadpV1alpha1()
	stores := map[string]store{
		KindStorageLocation:  storeOf[applyv1.BackupStorageLocationApplyConfiguration, velerov1.BackupStorageLocation, velerov1.BackupStorageLocationList](v1.BackupStorageLocations(namespace)),
		KindSnapshotLocation: storeOf[applyv1.VolumeSnapshotLocationApplyConfiguration, velerov1.VolumeSnapshotLocation, velerov1.VolumeSnapshotLocationList](v1.VolumeSnapshotLocations(namespace)),
		KindSchedule:         storeOf[applyv1.ScheduleApplyConfiguration, velerov1.Schedule, velerov1.ScheduleList](v1.Schedules(namespace)),
		KindPolicy:           storeOf[applyoadp.DataProtectionApplicationApplyConfiguration, oadpv1alpha1.DataProtectionApplication, oadpv1alpha1.DataProtectionApplicationList](oadp.DataProtectionApplications(namespace)),
	}
	var errs []error
	keep := map[[2]string]bool{}
	for _, o := range objs {
		keep[[2]string{o.Kind, o.Name}] = true
		if err := stores[o.Kind].apply(ctx, o.manifest); err != nil {
			errs = append(errs, fmt.Errorf("%s %q (%s): %w", o.Kind, o.Name, o.Source, err))
			continue
		}
		klog.V(2).InfoS("Applied the configuration's object", "kind", o.Kind, "name", o.Name, "source", o.Source)
	}
	for _, kind := range []string{KindStorageLocation, KindSnapshotLocation, KindSchedule, KindPolicy} {
		s := stores[kind]
		names, err := s.names(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			if keep[[2]string{kind, name}] {
				continue
			}
			if err := s.delete(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("deleting %s %q, which the configuration no longer holds: %w", kind, name, err))
				continue
			}
			klog.InfoS("Deleted an object the configuration no longer holds", "kind", kind, "name", name)
		}
	}
	return errors.Join(errs...)
}

// store is how a configuration applies, lists and deletes the objects of
// one kind.
type store struct {
	// apply applies an object's manifest (JSON).
	apply func(context.Context, []byte) error
	// names are the objects labelled as the configuration's.
	names  func(context.Context) ([]string, error)
	delete func(context.Context, string) error
}

// kindClient is the generated client of one kind: its apply
// configuration AC, its type T and its list L.
type kindClient[AC, T, L any] interface {
	Apply(context.Context, *AC, metav1.ApplyOptions) (*T, error)
	List(context.Context, metav1.ListOptions) (*L, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

func storeOf[AC, T, L any](c kindClient[AC, T, L]) store {
	return store{
		apply: func(ctx context.Context, manifest []byte) error {
			ac := new(AC)
			if err := json.Unmarshal(manifest, ac); err != nil {
				return err
			}
			_, err := c.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			return err
		},
		names: func(ctx context.Context) ([]string, error) {
			list, err := c.List(ctx, metav1.ListOptions{LabelSelector: Label + "=" + LabelValue})
			if err != nil {
				return nil, err
			}
			items, err := meta.ExtractList(any(list).(runtime.Object))
			if err != nil {
				return nil, err
			}
			var names []string
			for _, item := range items {
				m, err := meta.Accessor(item)
				if err != nil {
					return nil, err
				}
				names = append(names, m.GetName())
			}
			return names, nil
		},
		delete: func(ctx context.Context, name string) error { return c.Delete(ctx, name, metav1.DeleteOptions{}) },
	}
}

// HasStorageLocation reports whether objs hold a storage location: the
// server then makes no default location of its own.
func HasStorageLocation(objs []Object) bool {
	return slices.ContainsFunc(objs, func(o Object) bool { return o.Kind == KindStorageLocation })
}
