// Package version is the version of Backstop, set at build time with
// -ldflags "-X github.com/backstop-io/backstop/pkg/version.Version=...".
package version

// Version of this build.
var Version = "v0.1.0-dev"
