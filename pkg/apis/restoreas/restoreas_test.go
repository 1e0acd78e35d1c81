package restoreas

import (
	"reflect"
	"testing"
)

func TestFor(t *testing.T) {
	for _, c := range []struct {
		name   string
		user   string
		groups []string
		extra  map[string][]string
		want   User
		ok     bool
	}{
		{name: "a tenant", user: "alice", groups: []string{"system:authenticated", "team"}, ok: true,
			want: User{Username: "alice", Groups: []string{"system:authenticated", "team"}}},
		{name: "a cluster admin loses system:masters", user: "admin", groups: []string{"system:masters", "system:authenticated"}, ok: true,
			want: User{Username: "admin", Groups: []string{"system:authenticated"}}},
		{name: "a scoped token stays scoped", user: "bob", extra: map[string][]string{"scopes.authorization.openshift.io": {"user:info"}}, ok: true,
			want: User{Username: "bob", Extra: map[string][]string{"scopes.authorization.openshift.io": {"user:info"}}}},
		{name: "the server itself", user: "system:apiserver", groups: []string{"system:masters"}},
		{name: "nobody", user: ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := For(c.user, "", c.groups, c.extra)
			if ok != c.ok || !reflect.DeepEqual(got, c.want) {
				t.Errorf("For = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
			if !ok {
				return
			}
			back, found, err := Of(map[string]string{Annotation: got.String()})
			if err != nil || !found || !reflect.DeepEqual(back, got) {
				t.Errorf("Of(String()) = %+v, %v, %v", back, found, err)
			}
		})
	}
}

// TestOfRefusesPrivilege: an annotation written by hand (whoever may
// create Restores may) never makes a restore act as the server or with
// system:masters.
func TestOfRefusesPrivilege(t *testing.T) {
	for _, v := range []string{
		`{"username":"system:apiserver"}`,
		`{"username":"alice","groups":["system:masters"]}`,
		`{"username":""}`, `not json`,
	} {
		if as, _, err := Of(map[string]string{Annotation: v}); err == nil {
			t.Errorf("Of(%s) = %+v, accepted", v, as)
		}
	}
}
