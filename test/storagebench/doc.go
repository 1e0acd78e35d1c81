//go:build bench

// Package storagebench benchmarks the Pebble storage backend
// (github.com/backstop-io/backstop/pkg/storage/pebble) side by side with
// k8s.io/apiserver's etcd3 backend talking to a real etcd server.
//
// Both backends implement k8s.io/apiserver/pkg/storage.Interface and are
// driven by the same code, with the same objects (example.Pod), codec,
// transformer and resource prefix, in the same process and run. The etcd
// server is a separate process started on loopback by StartEtcd from the
// binary that hack/install-etcd.sh builds into _output/bin/etcd (override
// with the ETCD_BIN environment variable).
//
// The benchmarks live in bench_test.go; hack/bench.sh runs them and prints
// the pebble/etcd3 ratios. See docs/benchmarks.md.
//
// The package is separate from pkg/storage/pebble so that the Pebble backend
// never imports the etcd3 backend or the etcd client.
package storagebench
