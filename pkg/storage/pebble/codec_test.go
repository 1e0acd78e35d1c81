package pebble

import (
	"bytes"
	"reflect"
	"testing"
)

// TestCodecRoundTrip: records and events decode to what was encoded, and
// keys of the log and of the expiry index sort by revision and time.
func TestCodecRoundTrip(t *testing.T) {
	t.Run("current records", func(t *testing.T) {
		for _, v := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("y"), 5000)} {
			raw := encodeCurrent(v, 7, 3, 99)
			for _, a := range []*arena{nil, {}} {
				kv, err := decodeCurrentInto("k", raw, a)
				if err != nil {
					t.Fatal(err)
				}
				if kv.key != "k" || kv.modRev != 7 || kv.createRev != 3 || kv.expireAt != 99 || !bytes.Equal(kv.value, v) {
					t.Errorf("decoded %+v, want value of %d bytes at 7/3/99", kv, len(v))
				}
			}
		}
	})
	t.Run("events", func(t *testing.T) {
		for _, e := range []*logEvent{
			{rev: 5, typ: eventPut, key: "/a", value: []byte("v"), createRev: 5},
			{rev: 6, typ: eventPut, key: "/a", value: []byte("w"), createRev: 5, prev: &keyValue{key: "/a", value: []byte("v"), createRev: 5, modRev: 5}},
			{rev: 7, typ: eventDelete, key: "/a", prev: &keyValue{key: "/a", value: []byte("w"), createRev: 5, modRev: 6}},
		} {
			got, err := decodeEvent(e.rev, encodeEvent(e))
			if err != nil {
				t.Fatal(err)
			}
			// A delete carries no value: nil and empty are the same.
			if len(got.value) == 0 && len(e.value) == 0 {
				got.value = e.value
			}
			if !reflect.DeepEqual(got, e) {
				t.Errorf("event %d decoded to %+v (prev %+v), want %+v (prev %+v)", e.rev, got, got.prev, e, e.prev)
			}
		}
	})
	t.Run("key order", func(t *testing.T) {
		if bytes.Compare(eventKey(255), eventKey(256)) >= 0 || bytes.Compare(eventKey(1), eventKey(1<<40)) >= 0 {
			t.Error("log keys do not sort by revision")
		}
		if bytes.Compare(expiryKey(10, "zz"), expiryKey(11, "a")) >= 0 {
			t.Error("expiry keys do not sort by time first")
		}
		if currentKey("/a")[0] != prefixCurrent || eventKey(1)[0] != prefixEvent || expiryKey(1, "a")[0] != prefixExpiry {
			t.Error("a key lacks its prefix")
		}
	})
}

// TestCodecCorrupt: a truncated record or event is an error, never a panic
// or a value.
func TestCodecCorrupt(t *testing.T) {
	if _, err := decodeCurrent("k", encodeCurrent([]byte("v"), 1, 1, 0)[:recordHeader-1]); err == nil {
		t.Error("a record shorter than its header decoded")
	}
	full := encodeEvent(&logEvent{typ: eventPut, key: "/a", value: []byte("value"), createRev: 3, prev: &keyValue{value: []byte("old"), createRev: 2, modRev: 2}})
	for n := 0; n < len(full); n++ {
		if _, err := decodeEvent(9, full[:n]); err == nil {
			t.Errorf("the event's first %d of %d bytes decoded", n, len(full))
		}
	}
}
