package nonadmin

import (
	"context"
	"maps"
	"strings"
	"testing"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
)

// TestNonAdminBSLSync: a tenant's storage location waits for the admin
// where the policy asks for approval; approved, its credential is copied
// into the admin namespace under the location's NACUUID and the Velero
// location made; a Secret that is missing, or a copy's name taken by
// another, backs it off with the reason, and nothing else is made.
func TestNonAdminBSLSync(t *testing.T) {
	ctx := context.Background()
	id := oadpv1alpha1.NewNACUUID("team", "bucket")
	location := &oadpv1alpha1.NonAdminBackupStorageLocation{ObjectMeta: metav1.ObjectMeta{Name: "bucket", Namespace: "team"},
		Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: &velerov1.BackupStorageLocationSpec{Provider: "aws",
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "team-bucket"}},
			Config:      map[string]string{"region": "r", "s3Url": "https://s3.example"},
			Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"}}},
		// Its NACUUID recorded (a NACUUID is unique: the test names it).
		Status: oadpv1alpha1.NonAdminBackupStorageLocationStatus{Phase: oadpv1alpha1.NonAdminPhaseNew,
			VeleroBackupStorageLocation: &oadpv1alpha1.VeleroBackupStorageLocation{NACUUID: id, Name: id, Namespace: adminNS}}}
	credentials := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "team"}, Data: map[string][]byte{"cloud": []byte("[default]\nkey=v")}}
	squatter := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: adminNS}, Data: map[string][]byte{"cloud": []byte("other")}}
	// An encrypted one: its keys in another Secret of the tenant's.
	sealed := location.DeepCopy()
	sealed.Spec.BackupStorageLocationSpec.Config = map[string]string{"region": "r", "s3Url": "https://s3.example",
		encryption.ConfigSecret: "keys", encryption.ConfigSecretKey: "age"}
	identity, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: "team"}, Data: map[string][]byte{"age": []byte(identity.String() + "\n")}}
	badKeys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: "team"}, Data: map[string][]byte{"age": []byte("not a key\n")}}
	approvalRequired := &oadpv1alpha1.DataProtectionApplication{ObjectMeta: metav1.ObjectMeta{Name: "dpa", Namespace: adminNS},
		Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{Enable: ptr.To(true), RequireApprovalForBSL: ptr.To(true)}}}
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		secrets []runtime.Object
		// made: the Secret copy and the Velero location exist afterwards;
		// condition and says: the condition that is false, and why.
		made bool
		// squatted: the copy's name is another Secret's, left as it is.
		squatted  bool
		condition oadpv1alpha1.NonAdminCondition
		says      string
		// identities: the encryption keys the copy holds ("" for none).
		identities string
	}{
		{name: "approval required: pending", objs: []runtime.Object{location, approvalRequired}, secrets: []runtime.Object{credentials},
			condition: oadpv1alpha1.NonAdminBSLConditionApproved, says: oadpv1alpha1.MessageBslApprovalPending},
		{name: "no approval required: copied and made", objs: []runtime.Object{location}, secrets: []runtime.Object{credentials}, made: true},
		{name: "its Secret missing", objs: []runtime.Object{location},
			condition: oadpv1alpha1.NonAdminBSLConditionSecretSynced, says: "Secret creds of namespace team"},
		{name: "the copy's name taken by another Secret", objs: []runtime.Object{location}, secrets: []runtime.Object{credentials, squatter}, squatted: true,
			condition: oadpv1alpha1.NonAdminBSLConditionSecretSynced, says: "was not made for this location"},
		{name: "encrypted: its keys copied beside the credentials", objs: []runtime.Object{sealed}, secrets: []runtime.Object{credentials, keys}, made: true,
			identities: identity.String() + "\n"},
		{name: "encrypted, its keys' Secret missing", objs: []runtime.Object{sealed}, secrets: []runtime.Object{credentials},
			condition: oadpv1alpha1.NonAdminBSLConditionSecretSynced, says: "Secret keys of namespace team, named in spec.backupStorageLocationSpec.config.encryptionSecret, does not exist"},
		{name: "encrypted, its keys no keys", objs: []runtime.Object{sealed}, secrets: []runtime.Object{credentials, badKeys},
			condition: oadpv1alpha1.NonAdminBSLConditionSecretSynced, says: "unknown identity type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := enginetest.New(t, tc.objs...)
			core := fake.NewSimpleClientset(tc.secrets...)
			v, o := w.Factory.Velero().V1(), w.Factory.Oadp().V1alpha1()
			c, err := NewBSLController(BSLConfig{Client: w.Client, Secrets: core.CoreV1(), AdminNamespace: adminNS, Locations: o.NonAdminBackupStorageLocations(),
				Requests: o.NonAdminBackupStorageLocationRequests(), VeleroLocations: v.BackupStorageLocations(), DPAs: o.DataProtectionApplications()})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.sync(ctx, cache.ObjectName{Namespace: "team", Name: "bucket"}); err != nil {
				t.Fatal(err)
			}
			got, err := w.Client.OadpV1alpha1().NonAdminBackupStorageLocations("team").Get(ctx, "bucket", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			bsl, bslErr := w.Client.VeleroV1().BackupStorageLocations(adminNS).Get(ctx, id, metav1.GetOptions{})
			copied, copyErr := core.CoreV1().Secrets(adminNS).Get(ctx, id, metav1.GetOptions{})
			if tc.made {
				if got.Status.Phase != oadpv1alpha1.NonAdminPhaseCreated || bslErr != nil || copyErr != nil || string(copied.Data["cloud"]) != "[default]\nkey=v" {
					t.Fatalf("status %s, Velero location %v, copy %v; want Created with both", got.Status.Phase, bslErr, copyErr)
				}
				if got := string(copied.Data[encryption.TenantCopyKey]); got != tc.identities {
					t.Errorf("the copy's encryption keys %q, want %q", got, tc.identities)
				}
				// The Velero location reads them from the copy alone.
				wantConfig := map[string]string{"region": "r", "s3Url": "https://s3.example"}
				if tc.identities != "" {
					wantConfig[encryption.ConfigSecret], wantConfig[encryption.ConfigSecretKey] = id, encryption.TenantCopyKey
				}
				if !maps.Equal(bsl.Spec.Config, wantConfig) {
					t.Errorf("the Velero location's config %v, want %v", bsl.Spec.Config, wantConfig)
				}
				return
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, string(tc.condition))
			if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, tc.says) {
				t.Errorf("condition %s: %+v, want false saying %q", tc.condition, cond, tc.says)
			}
			if !apierrors.IsNotFound(bslErr) {
				t.Errorf("a Velero location was made: %v", bslErr)
			}
			switch {
			case !tc.squatted && !apierrors.IsNotFound(copyErr):
				t.Errorf("the Secret was copied: %v", copyErr)
			case tc.squatted && (copyErr != nil || string(copied.Data["cloud"]) != "other"):
				t.Errorf("another's Secret was overwritten or removed: %v", copyErr)
			}
		})
	}
}
