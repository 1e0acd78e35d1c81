package items

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Lists as JSON. A backup writes each item as the JSON the source sent:
// decoding a page into maps and encoding every item again would cost more
// than reading it (the client's work, not the server's, bounds a backup
// once the rate limits allow). ListRaw splits a page into its items and
// decodes only what the filters read.

// NewRawClient returns a client for ListRaw with cfg (its rate limits
// included).
func NewRawClient(cfg *rest.Config) (rest.Interface, error) {
	return rest.UnversionedRESTClientFor(dynamic.ConfigFor(cfg))
}

// RawItem is one object of a list: its JSON, with apiVersion and kind
// (which servers leave out of the items of built-in lists), and the
// metadata the filters read.
type RawItem struct {
	Data       []byte
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	Labels     map[string]string
}

// RawPage is one page of a list.
type RawPage struct {
	Items    []RawItem
	Continue string
	// RemainingItemCount is the server's estimate, when it gives one.
	RemainingItemCount *int64
}

// rawList is a list response with its items left undecoded.
type rawList struct {
	Metadata struct {
		Continue           string `json:"continue"`
		RemainingItemCount *int64 `json:"remainingItemCount"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// itemHead is what ListRaw decodes of an item (nil: the key is absent).
type itemHead struct {
	APIVersion *string `json:"apiVersion"`
	Kind       *string `json:"kind"`
	Metadata   struct {
		Namespace string            `json:"namespace"`
		Name      string            `json:"name"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

// ListRaw reads one page of resource r, in namespace ("" for all, or for
// a cluster-scoped resource), with opts' limit, continue token and label
// selector.
func (s Source) ListRaw(ctx context.Context, r Resource, namespace string, opts metav1.ListOptions) (*RawPage, error) {
	if s.Raw == nil {
		return s.listDynamic(ctx, r, namespace, opts)
	}
	path := "/apis/" + r.GVR.Group + "/" + r.GVR.Version
	if r.GVR.Group == "" {
		path = "/api/" + r.GVR.Version
	}
	if r.Namespaced && namespace != "" {
		path += "/namespaces/" + namespace
	}
	req := s.Raw.Get().AbsPath(path, r.GVR.Resource)
	if opts.Limit > 0 {
		req = req.Param("limit", strconv.FormatInt(opts.Limit, 10))
	}
	if opts.Continue != "" {
		req = req.Param("continue", opts.Continue)
	}
	if opts.LabelSelector != "" {
		req = req.Param("labelSelector", opts.LabelSelector)
	}
	body, err := req.Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var list rawList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decoding a list of %s: %w", r.GroupResource(), err)
	}
	page := &RawPage{Items: make([]RawItem, 0, len(list.Items)), Continue: list.Metadata.Continue, RemainingItemCount: list.Metadata.RemainingItemCount}
	for _, data := range list.Items {
		item, err := rawItem(r, data)
		if err != nil {
			return nil, err
		}
		page.Items = append(page.Items, item)
	}
	return page, nil
}

// rawItem reads an item's head and gives it apiVersion and kind when the
// server left them out.
func rawItem(r Resource, data []byte) (RawItem, error) {
	var head itemHead
	if err := json.Unmarshal(data, &head); err != nil {
		return RawItem{}, fmt.Errorf("decoding an item of %s: %w", r.GroupResource(), err)
	}
	item := RawItem{Data: data, Namespace: head.Metadata.Namespace, Name: head.Metadata.Name, Labels: head.Metadata.Labels}
	if head.APIVersion != nil && head.Kind != nil && *head.APIVersion != "" && *head.Kind != "" {
		item.APIVersion, item.Kind = *head.APIVersion, *head.Kind
		return item, nil
	}
	item.APIVersion, item.Kind = r.GVR.GroupVersion().String(), r.Kind
	typed, err := withTypeMeta(data, item.APIVersion, item.Kind, head.APIVersion == nil && head.Kind == nil)
	if err != nil {
		return RawItem{}, fmt.Errorf("an item of %s: %w", r.GroupResource(), err)
	}
	item.Data = typed
	return item, nil
}

// withTypeMeta gives the JSON object data apiVersion and kind. absent says
// it has neither key, as the items of built-in lists: they are put first,
// without decoding the rest. Otherwise (an empty one sent) the object is
// decoded and encoded again, so that it has each key once.
func withTypeMeta(data []byte, apiVersion, kind string, absent bool) ([]byte, error) {
	head, err := json.Marshal(struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}{apiVersion, kind})
	if err != nil {
		return nil, err
	}
	if !absent {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			return nil, err
		}
		v, _ := json.Marshal(apiVersion)
		k, _ := json.Marshal(kind)
		fields["apiVersion"], fields["kind"] = v, k
		return json.Marshal(fields)
	}
	rest := bytes.TrimSpace(trimObjectStart(data))
	if len(rest) == 0 || rest[0] == '}' {
		return head, nil
	}
	// {"apiVersion":..,"kind":..} + , + the object's fields.
	out := make([]byte, 0, len(head)+len(data))
	out = append(out, head[:len(head)-1]...)
	out = append(out, ',')
	return append(out, rest...), nil
}

// trimObjectStart returns data after its opening brace (and white space).
func trimObjectStart(data []byte) []byte {
	for i, c := range data {
		if c == '{' {
			return data[i+1:]
		}
	}
	return data
}

// listDynamic is ListRaw through the dynamic client (a Source without a
// raw client, as in tests with a fake one).
func (s Source) listDynamic(ctx context.Context, r Resource, namespace string, opts metav1.ListOptions) (*RawPage, error) {
	var ri dynamic.ResourceInterface = s.Dynamic.Resource(r.GVR)
	if r.Namespaced && namespace != "" {
		ri = s.Dynamic.Resource(r.GVR).Namespace(namespace)
	}
	list, err := ri.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	page := &RawPage{Continue: list.GetContinue(), RemainingItemCount: list.GetRemainingItemCount()}
	for i := range list.Items {
		data, err := json.Marshal(list.Items[i].Object)
		if err != nil {
			return nil, fmt.Errorf("encoding an item of %s: %w", r.GroupResource(), err)
		}
		item, err := rawItem(r, data)
		if err != nil {
			return nil, err
		}
		page.Items = append(page.Items, item)
	}
	return page, nil
}
