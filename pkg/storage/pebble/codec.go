package pebble

// The encodings of the database's records: keys of each prefix, current
// records (a header and the value) and events of the log.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

func currentKey(key string) []byte {
	b := make([]byte, 1+len(key))
	b[0] = prefixCurrent
	copy(b[1:], key)
	return b
}

func eventKey(rev int64) []byte {
	b := make([]byte, 9)
	b[0] = prefixEvent
	binary.BigEndian.PutUint64(b[1:], uint64(rev))
	return b
}

func int64Bytes(v int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(v))
	return b
}

func encodeCurrent(value []byte, modRev, createRev, expireAt int64) []byte {
	b := make([]byte, recordHeader+len(value))
	binary.BigEndian.PutUint64(b, uint64(modRev))
	binary.BigEndian.PutUint64(b[8:], uint64(createRev))
	binary.BigEndian.PutUint64(b[16:], uint64(expireAt))
	copy(b[recordHeader:], value)
	return b
}

func decodeCurrent(key string, raw []byte) (*keyValue, error) {
	return decodeCurrentInto(key, raw, nil)
}

// decodeCurrentInto decodes a current record, copying its value into a (nil:
// its own allocation).
func decodeCurrentInto(key string, raw []byte, a *arena) (*keyValue, error) {
	if len(raw) < recordHeader {
		return nil, fmt.Errorf("corrupt record for key %q: %d bytes", key, len(raw))
	}
	kv := &keyValue{
		key:       key,
		modRev:    int64(binary.BigEndian.Uint64(raw)),
		createRev: int64(binary.BigEndian.Uint64(raw[8:])),
		expireAt:  int64(binary.BigEndian.Uint64(raw[16:])),
	}
	if a == nil {
		kv.value = bytes.Clone(raw[recordHeader:])
	} else {
		kv.value = a.copy(raw[recordHeader:])
	}
	return kv, nil
}

// arena hands out copies of byte slices from blocks that double in size up
// to arenaBlock: the values a range read returns cost a few allocations
// instead of one each, and a small read stays small.
type arena struct{ block []byte }

const arenaBlock = 256 << 10

func (a *arena) copy(b []byte) []byte {
	if len(b) > arenaBlock/4 {
		return bytes.Clone(b)
	}
	if cap(a.block)-len(a.block) < len(b) {
		size := min(max(2*cap(a.block), 4*len(b), 4096), arenaBlock)
		a.block = make([]byte, 0, size)
	}
	n := len(a.block)
	a.block = append(a.block, b...)
	return a.block[n:len(a.block):len(a.block)]
}

func expiryKey(expireAt int64, key string) []byte {
	b := make([]byte, 9+len(key))
	b[0] = prefixExpiry
	binary.BigEndian.PutUint64(b[1:], uint64(expireAt))
	copy(b[9:], key)
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func encodeEvent(e *logEvent) []byte {
	b := make([]byte, 0, 32+len(e.key)+len(e.value))
	b = append(b, byte(e.typ))
	b = appendBytes(b, []byte(e.key))
	b = appendBytes(b, e.value)
	b = binary.AppendVarint(b, e.createRev)
	if e.prev == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendBytes(b, e.prev.value)
		b = binary.AppendVarint(b, e.prev.createRev)
		b = binary.AppendVarint(b, e.prev.modRev)
	}
	return b
}

type eventReader struct {
	b   []byte
	err error
}

func (r *eventReader) bytes() []byte {
	if r.err != nil {
		return nil
	}
	n, l := binary.Uvarint(r.b)
	if l <= 0 || uint64(len(r.b)-l) < n {
		r.err = errors.New("truncated field")
		return nil
	}
	v := bytes.Clone(r.b[l : l+int(n)])
	r.b = r.b[l+int(n):]
	return v
}

func (r *eventReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, l := binary.Varint(r.b)
	if l <= 0 {
		r.err = errors.New("truncated varint")
		return 0
	}
	r.b = r.b[l:]
	return v
}

func (r *eventReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New("truncated byte")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func decodeEvent(rev int64, raw []byte) (*logEvent, error) {
	r := &eventReader{b: raw}
	e := &logEvent{rev: rev}
	e.typ = eventType(r.byte())
	e.key = string(r.bytes())
	e.value = r.bytes()
	e.createRev = r.varint()
	if r.byte() == 1 {
		e.prev = &keyValue{key: e.key}
		e.prev.value = r.bytes()
		e.prev.createRev = r.varint()
		e.prev.modRev = r.varint()
	}
	if r.err == nil && e.typ != eventPut && e.typ != eventDelete {
		r.err = fmt.Errorf("unknown event type %d", e.typ)
	}
	if r.err != nil {
		return nil, fmt.Errorf("corrupt log event at revision %d: %w", rev, r.err)
	}
	return e, nil
}
