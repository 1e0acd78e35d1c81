package main

import (
	"os"
	"testing"
)

// TestDocIsCurrent: docs/lifecycle.md is what the tables say.
func TestDocIsCurrent(t *testing.T) {
	got, err := os.ReadFile("../../docs/lifecycle.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != render() {
		t.Error("docs/lifecycle.md is stale: go run ./hack/lifecycle-doc > docs/lifecycle.md")
	}
}
