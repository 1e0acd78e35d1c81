// Package resource owns what the registry of every Backstop resource shares:
// the base create/update strategy (status reset on create, status kept on
// spec updates, generation bumped on spec changes only, object-meta
// validation), the status subresource strategy and REST type, kubectl table
// columns, and the construction of a genericregistry.Store.
//
// Each resource keeps its own rules (defaults, validation, columns) in its
// own strategy.go under pkg/registry/<group>/<resource>, embedding Strategy.
package resource
