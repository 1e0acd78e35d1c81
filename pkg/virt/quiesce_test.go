package virt_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
)

// guestWriteFile writes a file in the guest through its agent.
func guestWriteFile(t *testing.T, dom *virttest.Domain, path, content string) {
	t.Helper()
	var open struct {
		Return int `json:"return"`
	}
	out := dom.AgentCommand(t, fmt.Sprintf(`{"execute":"guest-file-open","arguments":{"path":%q,"mode":"w"}}`, path))
	if err := json.Unmarshal([]byte(out), &open); err != nil {
		t.Fatalf("guest-file-open: %s", out)
	}
	dom.AgentCommand(t, fmt.Sprintf(`{"execute":"guest-file-write","arguments":{"handle":%d,"buf-b64":%q}}`, open.Return,
		base64.StdEncoding.EncodeToString([]byte(content))))
	dom.AgentCommand(t, fmt.Sprintf(`{"execute":"guest-file-close","arguments":{"handle":%d}}`, open.Return))
}

// TestQuiescedBackup: with a guest agent (a booted Linux guest whose disk
// holds a mounted ext4 file system), a quiesced backup freezes the file
// systems as it starts and thaws them right after: the copy's file system
// is clean, where an unquiesced copy of the same mounted file system needs
// journal recovery.
func TestQuiescedBackup(t *testing.T) {
	c := open(t)
	dom := virttest.NewGuestDomain(t, "backstop-virt-guest")
	guestWriteFile(t, dom, "/mnt/data", strings.Repeat("backstop\n", 1000))
	ctx := context.Background()

	quiesced, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "quiesced"), Checkpoint: "cp1", Quiesce: true}, nil)
	if err != nil {
		t.Fatalf("quiesced backup: %v", err)
	}
	if !quiesced.Quiesced || quiesced.QuiesceError != nil {
		t.Fatalf("quiesced backup: quiesced %v, error %v", quiesced.Quiesced, quiesced.QuiesceError)
	}
	if status := dom.AgentCommand(t, `{"execute":"guest-fsfreeze-status"}`); !strings.Contains(status, `"thawed"`) {
		t.Errorf("the guest's file systems after the backup: %s, want thawed", status)
	}
	if got := virttest.FilesystemState(t, quiesced.Targets["vda"]); got != "clean" {
		t.Errorf("file system in the quiesced backup: %s, want clean", got)
	}

	plain, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "plain"), Incremental: "",
		Checkpoint: "cp2"}, nil)
	if err != nil {
		t.Fatalf("unquiesced backup: %v", err)
	}
	if plain.Quiesced {
		t.Error("a backup without Quiesce says it quiesced")
	}
	if got := virttest.FilesystemState(t, plain.Targets["vda"]); got != "needs_recovery" {
		t.Errorf("file system in the unquiesced backup of a mounted file system: %s, want needs_recovery", got)
	}
}
