package resource

import (
	"context"
	"net/http"
	"slices"

	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Who writes status. The status of a resource with a life (Backup, Restore,
// DeleteBackupRequest, Schedule, NonAdminBackup, NonAdminRestore,
// VirtualMachineBackup, VirtualMachineBackupTracker) is the server's account of what happened:
// its engines write it, nobody else. A request comes from the engines when
// its user is the server's own loopback user, or a member of one of the
// groups given to --engine-groups (engines run outside the server, such as
// a vendor's with --disable-controllers, or tests playing an engine they
// turned off). Everyone else, cluster admins included, is a client:
// authorization decides whether a client may call the status subresource,
// and the status rules refuse any change it makes to such a status.

// Engines says which requests come from the server's engines.
type Engines struct {
	// Groups whose members act as engines; none by default.
	Groups []string
}

// Is reports whether u is the server's engines.
func (e Engines) Is(u user.Info) bool {
	if u == nil {
		return false
	}
	if u.GetName() == user.APIServerUser {
		return true
	}
	for _, g := range u.GetGroups() {
		if slices.Contains(e.Groups, g) {
			return true
		}
	}
	return false
}

type engineKey struct{}

// WithEngine marks ctx as a request of the server's engines.
func WithEngine(ctx context.Context) context.Context {
	return context.WithValue(ctx, engineKey{}, true)
}

// FromEngine reports whether the request of ctx comes from the server's
// engines.
func FromEngine(ctx context.Context) bool {
	v, _ := ctx.Value(engineKey{}).(bool)
	return v
}

// Filter marks the requests of the engines, after authentication (it must
// sit inside the authentication filter of the handler chain).
func (e Engines) Filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, ok := genericapirequest.UserFrom(req.Context()); ok && e.Is(u) {
			req = req.WithContext(WithEngine(req.Context()))
		}
		next.ServeHTTP(w, req)
	})
}
