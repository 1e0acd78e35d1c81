package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestObjectsSurviveRestart: everything acknowledged is there after a
// SIGKILL and after a clean stop, with the same UID and spec and a
// resourceVersion no older than the last one read (the queue engine moves
// backups on meanwhile).
func TestObjectsSurviveRestart(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	want := map[string]velerov1.Backup{}
	for i := 0; i < 20; i++ {
		b, err := s.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%02d", i), Namespace: ns},
			Spec:       velerov1.BackupSpec{IncludedNamespaces: []string{fmt.Sprintf("app%d", i)}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[b.Name] = *b
	}
	for _, kill := range []bool{true, false} {
		before, err := s.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range before.Items {
			want[b.Name] = b
		}
		s.Restart(kill)
		list, err := s.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list after restart (kill=%v): %v", kill, err)
		}
		if len(list.Items) != len(want) {
			t.Fatalf("after restart (kill=%v): %d backups, want %d", kill, len(list.Items), len(want))
		}
		for _, b := range list.Items {
			w := want[b.Name]
			if b.UID != w.UID || rv(t, b.ResourceVersion) < rv(t, w.ResourceVersion) || b.Spec.IncludedNamespaces[0] != w.Spec.IncludedNamespaces[0] {
				t.Errorf("after restart (kill=%v): %s uid/rv/spec %s/%s/%v, want %s/%s/%v", kill, b.Name,
					b.UID, b.ResourceVersion, b.Spec.IncludedNamespaces, w.UID, w.ResourceVersion, w.Spec.IncludedNamespaces)
			}
		}
	}
}

func rv(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", s, err)
	}
	return n
}
