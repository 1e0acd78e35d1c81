package apiserver

import (
	"testing"

	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// ns is the admin namespace, where the engines process Velero objects.
const ns = "backstop-system"

// TestEveryResourceAndVerb runs the conformance suite against the
// standalone server.
func TestEveryResourceAndVerb(t *testing.T) {
	s := framework.Start(t, framework.Options{Args: withoutBackupEngine})
	conformance.EveryResourceAndVerb(t, conformance.Target{Client: s.Clientset, Engine: s.EngineClientset()})
}
