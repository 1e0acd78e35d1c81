// Package resourcemodifiers owns Velero's restore resource modifiers: the
// rules of a ConfigMap a Restore names in spec.resourceModifier (version
// v1: conditions on an item's group-resource, name, namespace, labels and
// fields; JSON patches, JSON merge patches and strategic merge patches),
// read and checked before a restore starts (Parse: every error with its
// field path), and applied to each item the restore writes (Apply). The
// format is Velero's (docs: restore-resource-modifiers); the code is
// Backstop's.
package resourcemodifiers

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Version is the only version of the format.
const Version = "v1"

// ConfigMapKind is the kind of spec.resourceModifier that names a
// ConfigMap (compared without case, as Velero does).
const ConfigMapKind = "configmap"

// Document is a ConfigMap's one data value.
type Document struct {
	Version string `json:"version"`
	Rules   []Rule `json:"resourceModifierRules"`
}

// Rule is one rule: its conditions, and one kind of patches.
type Rule struct {
	Conditions       Conditions  `json:"conditions"`
	Patches          []JSONPatch `json:"patches,omitempty"`
	MergePatches     []DataPatch `json:"mergePatches,omitempty"`
	StrategicPatches []DataPatch `json:"strategicPatches,omitempty"`
}

// Conditions select the items a rule patches; all must hold.
type Conditions struct {
	// GroupResource is a glob of "<resource>.<group>" ("pods",
	// "deployments.apps", "*.apps"); "*" matches within one part.
	GroupResource     string                `json:"groupResource"`
	ResourceNameRegex string                `json:"resourceNameRegex,omitempty"`
	Namespaces        []string              `json:"namespaces,omitempty"`
	LabelSelector     *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// Matches are JSON patch tests the item must pass.
	Matches []Match `json:"matches,omitempty"`
}

// JSONPatch is one operation of RFC 6902; Value is a string that is
// sent as JSON when it reads as a number, a boolean, null, an object or
// an array, and as a string otherwise (in double quotes: a string always).
type JSONPatch struct {
	Operation string `json:"operation"`
	From      string `json:"from,omitempty"`
	Path      string `json:"path"`
	Value     string `json:"value,omitempty"`
}

// Match is a JSON patch test: the value at Path is Value.
type Match struct {
	Path  string `json:"path"`
	Value string `json:"value"`
}

// DataPatch is a merge or strategic merge patch, YAML or JSON.
type DataPatch struct {
	PatchData string `json:"patchData"`
}

// Modifiers are a document's rules, checked and compiled.
type Modifiers struct {
	rules []rule
}

type rule struct {
	groupResource string
	name          *regexp.Regexp
	namespaces    []string
	selector      labels.Selector
	// matches is the JSON patch of the Matches' tests (nil: none).
	matches jsonpatch.Patch
	// Exactly one of these.
	jsonPatch jsonpatch.Patch
	merge     [][]byte
	strategic [][]byte
}

var jsonPatchOps = []string{"add", "remove", "replace", "move", "copy", "test"}

// Parse reads the rules of a resource modifiers ConfigMap (one data key,
// whatever its name, holding a Document) and checks them. Its errors
// name the fields they are about.
func Parse(cm *corev1.ConfigMap) (*Modifiers, error) {
	if len(cm.Data) != 1 {
		return nil, fmt.Errorf("ConfigMap %s/%s holds %d data keys, want one holding the resource modifiers", cm.Namespace, cm.Name, len(cm.Data))
	}
	var doc Document
	for _, v := range cm.Data {
		if err := yaml.UnmarshalStrict([]byte(v), &doc); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	m, errs := compile(&doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, errs.ToAggregate())
	}
	return m, nil
}

func compile(doc *Document) (*Modifiers, field.ErrorList) {
	var errs field.ErrorList
	if !strings.EqualFold(doc.Version, Version) {
		errs = append(errs, field.NotSupported(field.NewPath("version"), doc.Version, []string{Version}))
	}
	rulesPath := field.NewPath("resourceModifierRules")
	if len(doc.Rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rule"))
	}
	m := &Modifiers{}
	for i, r := range doc.Rules {
		c, rerrs := compileRule(r, rulesPath.Index(i))
		errs = append(errs, rerrs...)
		m.rules = append(m.rules, c)
	}
	return m, errs
}

func compileRule(r Rule, p *field.Path) (rule, field.ErrorList) {
	var errs field.ErrorList
	var out rule
	cp := p.Child("conditions")
	gr := r.Conditions.GroupResource
	if gr == "" {
		errs = append(errs, field.Required(cp.Child("groupResource"), `a glob of "<resource>.<group>"`))
	} else if _, err := path.Match(globPath(gr), ""); err != nil {
		errs = append(errs, field.Invalid(cp.Child("groupResource"), gr, err.Error()))
	}
	out.groupResource = globPath(gr)
	if r.Conditions.ResourceNameRegex != "" {
		re, err := regexp.Compile(r.Conditions.ResourceNameRegex)
		if err != nil {
			errs = append(errs, field.Invalid(cp.Child("resourceNameRegex"), r.Conditions.ResourceNameRegex, err.Error()))
		}
		out.name = re
	}
	out.namespaces = r.Conditions.Namespaces
	if r.Conditions.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(r.Conditions.LabelSelector)
		if err != nil {
			errs = append(errs, field.Invalid(cp.Child("labelSelector"), r.Conditions.LabelSelector, err.Error()))
		}
		out.selector = sel
	}
	if len(r.Conditions.Matches) > 0 {
		ops := make([]JSONPatch, 0, len(r.Conditions.Matches))
		for i, mt := range r.Conditions.Matches {
			if mt.Path == "" {
				errs = append(errs, field.Required(cp.Child("matches").Index(i).Child("path"), ""))
			}
			ops = append(ops, JSONPatch{Operation: "test", Path: mt.Path, Value: mt.Value})
		}
		patch, err := jsonPatchOf(ops)
		if err != nil {
			errs = append(errs, field.Invalid(cp.Child("matches"), r.Conditions.Matches, err.Error()))
		}
		out.matches = patch
	}

	kinds := 0
	if len(r.Patches) > 0 {
		kinds++
		for i, op := range r.Patches {
			if !slices.Contains(jsonPatchOps, op.Operation) {
				errs = append(errs, field.NotSupported(p.Child("patches").Index(i).Child("operation"), op.Operation, jsonPatchOps))
			}
			if op.Path == "" {
				errs = append(errs, field.Required(p.Child("patches").Index(i).Child("path"), ""))
			}
			if (op.Operation == "move" || op.Operation == "copy") && op.From == "" {
				errs = append(errs, field.Required(p.Child("patches").Index(i).Child("from"), "a "+op.Operation+" needs it"))
			}
		}
		patch, err := jsonPatchOf(r.Patches)
		if err != nil {
			errs = append(errs, field.Invalid(p.Child("patches"), "", err.Error()))
		}
		out.jsonPatch = patch
	}
	for _, kind := range []struct {
		name    string
		patches []DataPatch
		into    *[][]byte
	}{{"mergePatches", r.MergePatches, &out.merge}, {"strategicPatches", r.StrategicPatches, &out.strategic}} {
		if len(kind.patches) == 0 {
			continue
		}
		kinds++
		for i, dp := range kind.patches {
			data, err := yaml.YAMLToJSON([]byte(dp.PatchData))
			var obj map[string]any
			if err == nil {
				err = json.Unmarshal(data, &obj)
			}
			if err != nil || obj == nil {
				if err == nil {
					err = errors.New("not an object")
				}
				errs = append(errs, field.Invalid(p.Child(kind.name).Index(i).Child("patchData"), dp.PatchData, err.Error()))
				continue
			}
			*kind.into = append(*kind.into, data)
		}
	}
	switch {
	case kinds == 0:
		errs = append(errs, field.Required(p, "one of patches, mergePatches and strategicPatches"))
	case kinds > 1:
		errs = append(errs, field.Invalid(p, "", "only one of patches, mergePatches and strategicPatches"))
	}
	return out, errs
}

// globPath turns a "<resource>.<group>" glob into a path.Match pattern
// whose separator is the dot.
func globPath(s string) string { return strings.ReplaceAll(s, ".", "/") }

// jsonPatchOf is the RFC 6902 patch of ops.
func jsonPatchOf(ops []JSONPatch) (jsonpatch.Patch, error) {
	type op struct {
		Op    string          `json:"op"`
		From  string          `json:"from,omitempty"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value,omitempty"`
	}
	out := make([]op, 0, len(ops))
	for _, o := range ops {
		x := op{Op: o.Operation, From: o.From, Path: o.Path}
		if o.Operation == "add" || o.Operation == "replace" || o.Operation == "test" {
			x.Value = jsonValue(o.Value)
		}
		out = append(out, x)
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return jsonpatch.DecodePatch(data)
}

// jsonValue is a patch value as JSON: a number, a boolean, null, an
// object or an array as such; a string in double quotes as that string;
// anything else as a string.
func jsonValue(v string) json.RawMessage {
	switch {
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && json.Valid([]byte(v)):
		return json.RawMessage(v)
	case v == "true" || v == "false" || v == "null":
		return json.RawMessage(v)
	case strings.HasPrefix(v, "{") || strings.HasPrefix(v, "["):
		if json.Valid([]byte(v)) {
			return json.RawMessage(v)
		}
	default:
		if _, err := strconv.ParseFloat(v, 64); err == nil && json.Valid([]byte(v)) {
			return json.RawMessage(v)
		}
	}
	quoted, _ := json.Marshal(v)
	return quoted
}

// Apply applies every rule whose conditions obj meets, in order, to obj
// (its group-resource "<resource>.<group>", "pods" for the core group).
// The conditions are read on obj as it came. Strategic merge patches need
// obj's kind in scheme. A rule that fails leaves obj as the rules before
// it made it; the errors say which rules failed and why.
func (m *Modifiers) Apply(obj *unstructured.Unstructured, groupResource string, scheme *runtime.Scheme) error {
	if m == nil {
		return nil
	}
	// Only a rule after another needs the item as it came.
	original := obj
	if len(m.rules) > 1 {
		original = obj.DeepCopy()
	}
	var errs []error
	for i, r := range m.rules {
		ok, err := r.selects(original, groupResource)
		if err != nil {
			errs = append(errs, fmt.Errorf("resource modifier rule %d: %w", i, err))
			continue
		}
		if !ok {
			continue
		}
		patched, err := r.apply(obj, scheme)
		if err != nil {
			errs = append(errs, fmt.Errorf("resource modifier rule %d: %w", i, err))
			continue
		}
		obj.Object = patched.Object
	}
	return errors.Join(errs...)
}

// selects reports whether the rule's conditions hold for obj.
func (r rule) selects(obj *unstructured.Unstructured, groupResource string) (bool, error) {
	if ok, _ := path.Match(r.groupResource, globPath(groupResource)); !ok {
		return false, nil
	}
	if r.name != nil && !r.name.MatchString(obj.GetName()) {
		return false, nil
	}
	if ns := obj.GetNamespace(); ns != "" && len(r.namespaces) > 0 && !slices.Contains(r.namespaces, ns) {
		return false, nil
	}
	if r.selector != nil && !r.selector.Matches(labels.Set(obj.GetLabels())) {
		return false, nil
	}
	if r.matches != nil {
		data, err := obj.MarshalJSON()
		if err != nil {
			return false, err
		}
		if _, err := r.matches.Apply(data); err != nil {
			// A failed test (or a path that is not there): not selected.
			return false, nil
		}
	}
	return true, nil
}

// apply patches a copy of obj with the rule's patches.
func (r rule) apply(obj *unstructured.Unstructured, scheme *runtime.Scheme) (*unstructured.Unstructured, error) {
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	switch {
	case r.jsonPatch != nil:
		patched, err := r.jsonPatch.Apply(data)
		if errors.Is(err, jsonpatch.ErrTestFailed) {
			// A test among the patches that fails leaves the item as it
			// is, as in Velero.
			return obj, nil
		}
		if err != nil {
			return nil, fmt.Errorf("JSON patch: %w", err)
		}
		data = patched
	case len(r.merge) > 0:
		for _, p := range r.merge {
			if data, err = jsonpatch.MergePatch(data, p); err != nil {
				return nil, fmt.Errorf("JSON merge patch: %w", err)
			}
		}
	case len(r.strategic) > 0:
		gvk := obj.GroupVersionKind()
		typed, err := scheme.New(gvk)
		if err != nil {
			return nil, fmt.Errorf("strategic merge patch: %s has no Go type to merge by (use a JSON merge patch): %w", gvk, err)
		}
		for _, p := range r.strategic {
			if data, err = strategicpatch.StrategicMergePatch(data, p, typed); err != nil {
				return nil, fmt.Errorf("strategic merge patch: %w", err)
			}
		}
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("the patched object: %w", err)
	}
	return out, nil
}
