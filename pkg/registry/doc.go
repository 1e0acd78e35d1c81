// Package registry holds the registries of the served API groups, one
// package per resource under pkg/registry/<group>/<resource> (strategy.go:
// defaults, validation, status rules, columns; storage.go: the REST
// storage), built on pkg/registry/resource. Its tests walk the transition
// table of every resource with a life through that resource's status
// strategy.
package registry
