// Package encryption owns the encryption of what Backstop writes to a
// storage location that requires it: age (filippo.io/age: X25519, or the
// post-quantum hybrid) to the location's recipients, streamed in 64 KiB
// chunks so that memory stays flat whatever an object's size; read back
// with the location's identities. It owns the location config keys that
// say so, and the key rotation rule: the identities are a list, the last
// one is the current one (new objects are encrypted to its recipient),
// every one of them opens what was encrypted to it.
package encryption

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The storage location config keys (Velero's spec.config) of encryption.
// A location that sets ConfigSecret or ConfigIdentitiesFile requires
// encryption: everything Backstop writes there is encrypted.
const (
	// ConfigSecret names a Secret of the location's namespace whose key
	// ConfigSecretKey (DefaultSecretKey when unset) holds the location's
	// age identities, one a line, as age-keygen writes them.
	ConfigSecret    = "encryptionSecret"
	ConfigSecretKey = "encryptionSecretKey"
	// ConfigIdentitiesFile is a file of the server holding the identities
	// (standalone mode, which reads no Secrets). Never a tenant's.
	ConfigIdentitiesFile = "encryptionIdentitiesFile"
	// ConfigRecipients are more age recipients (public keys, separated by
	// commas or white space) every new object is encrypted to besides the
	// current identity: a key kept offline, to read the backups with the
	// age CLI when the cluster and its Secrets are gone.
	ConfigRecipients = "encryptionRecipients"

	DefaultSecretKey = "identities"

	// TenantCopyKey is the key of a tenant's identities in the copy of
	// its Secrets the server makes in the admin namespace (beside its
	// credentials), which the tenant's Velero location names.
	TenantCopyKey = "backstop-encryption-identities"
)

// Header is how every age file begins: an object that does not is
// plaintext (written before its location required encryption).
const Header = "age-encryption.org/v1\n"

// Required reports whether a location's config requires encryption.
func Required(config map[string]string) bool {
	return config[ConfigSecret] != "" || config[ConfigIdentitiesFile] != ""
}

// ValidateConfig checks the encryption keys of a location's config (at
// path, its spec.config): a Secret name, its key, a file, recipients
// that parse and can be encrypted to together. tenant forbids the
// server's files.
func ValidateConfig(config map[string]string, tenant bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	secret, file := config[ConfigSecret], config[ConfigIdentitiesFile]
	if secret != "" {
		for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(secret, false) {
			errs = append(errs, field.Invalid(path.Key(ConfigSecret), secret, msg))
		}
	}
	if key := config[ConfigSecretKey]; key != "" {
		if secret == "" {
			errs = append(errs, field.Forbidden(path.Key(ConfigSecretKey), "only with "+ConfigSecret))
		}
		for _, msg := range utilvalidation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(path.Key(ConfigSecretKey), key, msg))
		}
	}
	switch {
	case file != "" && tenant:
		errs = append(errs, field.Forbidden(path.Key(ConfigIdentitiesFile), "a tenant's location reads no file of the server: name a Secret of its namespace in "+ConfigSecret))
	case file != "" && secret != "":
		errs = append(errs, field.Forbidden(path.Key(ConfigIdentitiesFile), "only one of "+ConfigSecret+" and "+ConfigIdentitiesFile))
	case file != "" && !strings.HasPrefix(file, "/"):
		errs = append(errs, field.Invalid(path.Key(ConfigIdentitiesFile), file, "an absolute path"))
	}
	if r, ok := config[ConfigRecipients]; ok {
		if !Required(config) {
			errs = append(errs, field.Forbidden(path.Key(ConfigRecipients), "only with "+ConfigSecret+" or "+ConfigIdentitiesFile+": the location's own identities come first"))
		}
		if _, err := parseRecipients(r); err != nil {
			// The value is not echoed: a private key pasted by mistake
			// would be in the answer and the server's log.
			errs = append(errs, field.Invalid(path.Key(ConfigRecipients), field.OmitValueType{}, err.Error()))
		}
	}
	return errs
}

// parseRecipients reads recipients separated by commas or white space.
func parseRecipients(s string) ([]age.Recipient, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' })
	if len(fields) == 0 {
		return nil, errors.New("no age recipient (age1...)")
	}
	recipients, err := age.ParseRecipients(strings.NewReader(strings.Join(fields, "\n")))
	if err != nil {
		return nil, fmt.Errorf("age recipients: %w", err)
	}
	return recipients, nil
}

// Keys are a location's keys: the identities that open its objects, and
// the recipients new objects are encrypted to.
type Keys struct {
	identities []age.Identity
	recipients []age.Recipient
}

// ParseKeys reads identities (age-keygen's format: one a line, "#"
// comments) and more recipients (ConfigRecipients' value, "" for none).
// New objects are encrypted to the last identity's recipient and to the
// others given.
func ParseKeys(identities []byte, recipients string) (*Keys, error) {
	ids, err := age.ParseIdentities(bytes.NewReader(identities))
	if err != nil {
		// age's errors name lines, never key material.
		return nil, fmt.Errorf("the location's age identities: %w", err)
	}
	current, err := recipientOf(ids[len(ids)-1])
	if err != nil {
		return nil, err
	}
	k := &Keys{identities: ids, recipients: []age.Recipient{current}}
	if recipients != "" {
		more, err := parseRecipients(recipients)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", ConfigRecipients, err)
		}
		k.recipients = append(k.recipients, more...)
	}
	// age refuses to mix post-quantum recipients with others: say so now,
	// not at the first backup.
	if _, err := age.Encrypt(io.Discard, k.recipients...); err != nil {
		return nil, fmt.Errorf("the location's recipients cannot be encrypted to together: %w", err)
	}
	return k, nil
}

// recipientOf is the recipient of an identity.
func recipientOf(id age.Identity) (age.Recipient, error) {
	switch i := id.(type) {
	case *age.X25519Identity:
		return i.Recipient(), nil
	case *age.HybridIdentity:
		return i.Recipient(), nil
	default:
		return nil, fmt.Errorf("the location's current identity is of type %T, whose recipient is unknown", id)
	}
}

// Recipients are the public keys new objects are encrypted to.
func (k *Keys) Recipients() []string {
	out := make([]string, 0, len(k.recipients))
	for _, r := range k.recipients {
		if s, ok := r.(fmt.Stringer); ok {
			out = append(out, s.String())
		}
	}
	return out
}

// Encrypt returns the encryption of plaintext, read as it is read.
func (k *Keys) Encrypt(plaintext io.Reader) (io.Reader, error) {
	r, err := age.EncryptReader(plaintext, k.recipients...)
	if err != nil {
		return nil, fmt.Errorf("encrypting: %w", err)
	}
	return r, nil
}

// ErrNoKey is returned for an object encrypted to none of the location's
// identities (a key removed too early, or another location's object).
var ErrNoKey = errors.New("encrypted to none of the location's keys")

// Decrypt returns the plaintext of an object read from src: decrypted as
// it is read when it is an age file, as it is otherwise.
func (k *Keys) Decrypt(src io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(src, 4096)
	if head, _ := br.Peek(len(Header)); string(head) != Header {
		return br, nil
	}
	r, err := age.Decrypt(br, k.identities...)
	var noMatch *age.NoIdentityMatchError
	if errors.As(err, &noMatch) {
		return nil, ErrNoKey
	}
	if err != nil {
		return nil, fmt.Errorf("decrypting: %w", err)
	}
	return r, nil
}
