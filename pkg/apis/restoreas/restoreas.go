// Package restoreas is who a restore acts as: the annotation a Restore
// carries to write with a user's rights instead of the server's, and its
// value. It is no API type of its own (no generated code).
package restoreas

import (
	"encoding/json"
	"fmt"
)

// Annotation, on a Restore, names the user the restore is for
// (JSON User): the restore writes with that user's rights, not the
// server's. The tenants' engine sets it on the Restores it makes for
// NonAdminRestores, from the user who created them (as the server
// recorded it at admission). Whoever may create Restores may set it too,
// which can only narrow what a restore may write.
const Annotation = "backstop.io/restore-as"

// User is a user a restore acts as.
type User struct {
	Username string   `json:"username"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	// Extra is what the authenticator said besides (a scoped token's
	// scopes, a service account token's pod): a restore impersonates it
	// too, so that a scoped token's restore stays scoped.
	Extra map[string][]string `json:"extra,omitempty"`
}

// Privileged is the group whose members every authorizer lets do anything:
// never recorded as a group a restore acts with.
const Privileged = "system:masters"

// For is the user a restore made for u acts as: u with its UID, groups
// (but Privileged) and extras; ok is false for the server's own loopback
// user, which no restore acts as.
func For(name, uid string, groups []string, extra map[string][]string) (as User, ok bool) {
	if name == "" || name == "system:apiserver" {
		return User{}, false
	}
	as = User{Username: name, UID: uid}
	for _, g := range groups {
		if g != Privileged {
			as.Groups = append(as.Groups, g)
		}
	}
	if len(extra) > 0 {
		as.Extra = make(map[string][]string, len(extra))
		for k, v := range extra {
			as.Extra[k] = append([]string(nil), v...)
		}
	}
	return as, true
}

// String is the annotation value.
func (r User) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// Of reads Annotation from annotations; ok is false when there is none.
func Of(annotations map[string]string) (as User, ok bool, err error) {
	v, ok := annotations[Annotation]
	if !ok {
		return User{}, false, nil
	}
	if err := json.Unmarshal([]byte(v), &as); err != nil || as.Username == "" {
		return User{}, true, fmt.Errorf("annotation %s %q does not name a user", Annotation, v)
	}
	if safe, ok := For(as.Username, as.UID, as.Groups, as.Extra); !ok || len(safe.Groups) != len(as.Groups) {
		return User{}, true, fmt.Errorf("annotation %s %q names the server itself or %s: a restore acts as no such user", Annotation, v, Privileged)
	}
	return as, true, nil
}
