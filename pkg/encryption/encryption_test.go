package encryption

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func newIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func keysOf(t *testing.T, recipients string, ids ...*age.X25519Identity) *Keys {
	t.Helper()
	var lines []string
	for i, id := range ids {
		lines = append(lines, "# key "+string(rune('1'+i)), id.String())
	}
	k, err := ParseKeys([]byte(strings.Join(lines, "\n")+"\n"), recipients)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func seal(t *testing.T, k *Keys, plaintext []byte) []byte {
	t.Helper()
	r, err := k.Encrypt(bytes.NewReader(plaintext))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func open(k *Keys, sealed []byte) ([]byte, error) {
	r, err := k.Decrypt(bytes.NewReader(sealed))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// TestRotation: objects are encrypted to the last identity; after a key
// is added the old objects still open, new ones are encrypted to the new
// key only, and once the old key is removed its objects no longer open.
func TestRotation(t *testing.T) {
	old, next := newIdentity(t), newIdentity(t)
	plaintext := bytes.Repeat([]byte("password: hunter2\n"), 10000) // several 64 KiB chunks
	before := seal(t, keysOf(t, "", old), plaintext)
	if !bytes.HasPrefix(before, []byte(Header)) || bytes.Contains(before, []byte("hunter2")) {
		t.Fatalf("the sealed object does not look encrypted: %.60q", before)
	}

	rotated := keysOf(t, "", old, next)
	after := seal(t, rotated, plaintext)
	for name, sealed := range map[string][]byte{"before the rotation": before, "after": after} {
		if got, err := open(rotated, sealed); err != nil || !bytes.Equal(got, plaintext) {
			t.Errorf("an object sealed %s, opened with both keys: %d bytes, %v", name, len(got), err)
		}
	}
	if _, err := open(keysOf(t, "", old), after); !errors.Is(err, ErrNoKey) {
		t.Errorf("an object sealed after the rotation, opened with the old key alone: %v, want ErrNoKey", err)
	}
	if _, err := open(keysOf(t, "", next), before); !errors.Is(err, ErrNoKey) {
		t.Errorf("an object sealed before the rotation, the old key removed: %v, want ErrNoKey", err)
	}
}

// TestMoreRecipients: an offline recipient opens every new object with
// the age library alone, as the age CLI would.
func TestMoreRecipients(t *testing.T) {
	current, offline, other := newIdentity(t), newIdentity(t), newIdentity(t)
	k := keysOf(t, offline.Recipient().String()+", "+other.Recipient().String(), current)
	if got, want := k.Recipients(), []string{current.Recipient().String(), offline.Recipient().String(), other.Recipient().String()}; !slices.Equal(got, want) {
		t.Errorf("recipients %v, want %v", got, want)
	}
	sealed := seal(t, k, []byte("data"))
	r, err := age.Decrypt(bytes.NewReader(sealed), offline)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(r); string(got) != "data" {
		t.Errorf("opened with the offline key: %q", got)
	}
}

// TestPlaintextPasses: an object written before the location required
// encryption reads as it is; a damaged age object is an error.
func TestPlaintextPasses(t *testing.T) {
	k := keysOf(t, "", newIdentity(t))
	for _, plain := range []string{"", "a", "{\"kind\":\"Backup\"}", strings.Repeat("x", 100000)} {
		if got, err := open(k, []byte(plain)); err != nil || string(got) != plain {
			t.Errorf("plaintext of %d bytes: %d bytes back, %v", len(plain), len(got), err)
		}
	}
	sealed := seal(t, k, bytes.Repeat([]byte("y"), 200000))
	sealed[len(sealed)/2] ^= 1
	if _, err := open(k, sealed); err == nil {
		t.Error("an object with a flipped byte opened")
	}
}

func TestParseKeysRefuses(t *testing.T) {
	pq, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, identities, recipients, want string }{
		{"no identity", "# none\n", "", "no identities found"},
		{"a public key as an identity", newIdentity(t).Recipient().String(), "", "unknown identity type"},
		{"a bad recipient", newIdentity(t).String(), "age1nope", "config encryptionRecipients"},
		{"post-quantum mixed with X25519", newIdentity(t).String(), pq.Recipient().String(), "cannot be encrypted to together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeys([]byte(tc.identities), tc.recipients)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "AGE-SECRET-KEY") {
				t.Errorf("the error shows key material: %v", err)
			}
		})
	}
	t.Run("post-quantum alone", func(t *testing.T) {
		k, err := ParseKeys([]byte(pq.String()), "")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := open(k, seal(t, k, []byte("pq"))); err != nil || string(got) != "pq" {
			t.Errorf("a post-quantum round trip: %q, %v", got, err)
		}
	})
}

func TestValidateConfig(t *testing.T) {
	recipient := newIdentity(t).Recipient().String()
	for _, tc := range []struct {
		name   string
		config map[string]string
		tenant bool
		want   []string
	}{
		{"no encryption", map[string]string{"region": "x"}, false, nil},
		{"a Secret", map[string]string{ConfigSecret: "keys", ConfigSecretKey: "age.txt", ConfigRecipients: recipient}, true, nil},
		{"a file", map[string]string{ConfigIdentitiesFile: "/etc/backstop/keys.txt"}, false, nil},
		{"a tenant's file", map[string]string{ConfigIdentitiesFile: "/etc/backstop/keys.txt"}, true, []string{"spec.config[encryptionIdentitiesFile]"}},
		{"a relative file", map[string]string{ConfigIdentitiesFile: "keys.txt"}, false, []string{"spec.config[encryptionIdentitiesFile]"}},
		{"both", map[string]string{ConfigSecret: "keys", ConfigIdentitiesFile: "/k"}, false, []string{"spec.config[encryptionIdentitiesFile]"}},
		{"a Secret name that is a path", map[string]string{ConfigSecret: "../keys"}, false, []string{"spec.config[encryptionSecret]"}},
		{"a key without a Secret", map[string]string{ConfigSecretKey: "k"}, false, []string{"spec.config[encryptionSecretKey]"}},
		{"a bad key", map[string]string{ConfigSecret: "keys", ConfigSecretKey: "a/b"}, false, []string{"spec.config[encryptionSecretKey]"}},
		{"recipients without identities", map[string]string{ConfigRecipients: recipient}, false, []string{"spec.config[encryptionRecipients]"}},
		{"a bad recipient", map[string]string{ConfigSecret: "keys", ConfigRecipients: "AGE-SECRET-KEY-1X"}, false, []string{"spec.config[encryptionRecipients]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range ValidateConfig(tc.config, tc.tenant, field.NewPath("spec", "config")) {
				got = append(got, err.Field)
				if strings.Contains(err.Error(), "AGE-SECRET-KEY") {
					t.Errorf("the error shows key material: %v", err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("refused %v, want %v", got, tc.want)
			}
		})
	}
}
