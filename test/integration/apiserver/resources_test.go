package apiserver

import (
	"testing"

	"github.com/backstop-io/backstop/test/integration/conformance"
)

// ns is the admin namespace, where the engines process Velero objects.
const ns = "backstop-system"

// TestEveryResourceAndVerb runs the conformance suite against the
// standalone server.
func TestEveryResourceAndVerb(t *testing.T) {
	s := apiServer(t)
	conformance.EveryResourceAndVerb(t, conformance.Target{Client: s.Clientset, Engine: s.EngineClientset()})
}
