package pebble

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"
)

// Decoder turns stored bytes into objects and stamps their resourceVersion.
type Decoder interface {
	// Decode decodes value into objPtr and sets its resource version to rev.
	Decode(value []byte, objPtr runtime.Object, rev int64) error
	// DecodeListItem decodes one list item into a new object from newItemFunc.
	DecodeListItem(ctx context.Context, data []byte, rev uint64, newItemFunc func() runtime.Object) (runtime.Object, error)
}

// NewDefaultDecoder returns the decoder the upstream etcd3 backend uses by default.
func NewDefaultDecoder(codec runtime.Codec, versioner storage.Versioner) Decoder {
	return &defaultDecoder{codec: codec, versioner: versioner}
}

type defaultDecoder struct {
	codec     runtime.Codec
	versioner storage.Versioner
}

func (d *defaultDecoder) Decode(value []byte, objPtr runtime.Object, rev int64) error {
	if _, err := conversion.EnforcePtr(objPtr); err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %w", err)
	}
	if _, _, err := d.codec.Decode(value, nil, objPtr); err != nil {
		return err
	}
	if err := d.versioner.UpdateObject(objPtr, uint64(rev)); err != nil {
		klog.Errorf("failed to update object version: %v", err)
	}
	return nil
}

func (d *defaultDecoder) DecodeListItem(ctx context.Context, data []byte, rev uint64, newItemFunc func() runtime.Object) (runtime.Object, error) {
	obj, _, err := d.codec.Decode(data, nil, newItemFunc())
	if err != nil {
		return nil, err
	}
	if err := d.versioner.UpdateObject(obj, rev); err != nil {
		klog.Errorf("failed to update object version: %v", err)
	}
	return obj, nil
}

func decodeObj(codec runtime.Codec, versioner storage.Versioner, data []byte, rev int64) (runtime.Object, error) {
	obj, err := runtime.Decode(codec, data)
	if err != nil {
		return nil, err
	}
	if err := versioner.UpdateObject(obj, uint64(rev)); err != nil {
		return nil, fmt.Errorf("failure to version api object (%d) %#v: %w", rev, obj, err)
	}
	return obj, nil
}
