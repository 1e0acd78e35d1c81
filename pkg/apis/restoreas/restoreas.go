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
	return as, true, nil
}
