package cluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestEncryptedBackups: an S3 location whose age identities are in a
// Secret. A backup of a namespace holding a Secret leaves in the bucket
// only age files, none with the Secret's value in any form (the check is
// shown to find it: the tarball, opened with the key, holds it); the
// velero CLI reads the backup's logs and details through the server; a
// key added to the Secret, the next backup is encrypted to it, and both
// backups restore the Secret byte for byte.
func TestEncryptedBackups(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	srv := framework.StartS3(t)
	const bucket, prefix, ns = "sealed", "cluster", "vault"
	srv.MakeBucket(t, bucket)
	ctx := context.Background()
	step := inOrder(t)
	velero, wants := veleroCLI(t, c)
	value := "password-" + hex.EncodeToString(framework.RandomBytes(t, 16))
	newKey := func(t *testing.T) *age.X25519Identity {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	k1, k2 := newKey(t), newKey(t)
	keys := func(ids ...*age.X25519Identity) map[string][]byte {
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, "# public key: %s\n%s\n", id.Recipient(), id)
		}
		return map[string][]byte{encryption.DefaultSecretKey: []byte(b.String())}
	}
	// files are a backup's objects in the bucket.
	files := func(t *testing.T, backup string) map[string][]byte {
		t.Helper()
		out, err := framework.ReadTree(filepath.Join(srv.Root, bucket, prefix, "backups", backup))
		if err != nil || len(out) == 0 {
			t.Fatalf("the objects of backup %s: %v (%d)", backup, err, len(out))
		}
		return out
	}
	// open decrypts data with id and gunzips it.
	open := func(data []byte, id age.Identity) (string, error) {
		r, err := age.Decrypt(bytes.NewReader(data), id)
		if err != nil {
			return "", err
		}
		zr, err := gzip.NewReader(r)
		if err != nil {
			return "", err
		}
		plain, err := io.ReadAll(zr)
		return string(plain), err
	}
	forms := map[string]string{"as it is": value, "base64": base64.StdEncoding.EncodeToString([]byte(value))}

	step("an S3 location whose keys are in a Secret", func(t *testing.T) {
		creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey)
		for name, data := range map[string]map[string][]byte{"sealed-creds": {"cloud": []byte(creds)}, "sealed-keys": keys(k1)} {
			if _, err := c.Kube.CoreV1().Secrets(adminNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Create(ctx, &velerov1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Name: "sealed"},
			Spec: velerov1.BackupStorageLocationSpec{Provider: "aws",
				Config: map[string]string{"s3Url": srv.Endpoint, "region": "us-east-1", "s3ForcePathStyle": "true",
					encryption.ConfigSecret: "sealed-keys"},
				Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sealed-creds"}, Key: "cloud"},
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: bucket, Prefix: prefix}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "location sealed Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, "sealed", metav1.GetOptions{})
			return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		})
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Data: map[string][]byte{"password": []byte(value)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	backup := func(t *testing.T, name string) map[string][]byte {
		t.Helper()
		wants("backup create --wait", velero("backup", "create", name, "--include-namespaces", ns, "--storage-location", "sealed", "--wait"),
			"Backup completed with status: Completed")
		return files(t, name)
	}
	step("the bucket holds age files, and the Secret's value in none of them", func(t *testing.T) {
		objects := backup(t, "sealed-1")
		for name, data := range objects {
			if !bytes.HasPrefix(data, []byte(encryption.Header)) {
				t.Errorf("%s: not an age file: %.40q", name, data)
			}
			for form, v := range forms {
				if bytes.Contains(data, []byte(v)) {
					t.Errorf("%s holds the Secret's value (%s)", name, form)
				}
			}
		}
		tarball, err := open(objects["sealed-1.tar.gz"], k1)
		if err != nil || !strings.Contains(tarball, forms["base64"]) {
			t.Errorf("the tarball, opened with the key (%v), does not hold the Secret's value: the check above finds nothing", err)
		}
	})

	// The links are the server's (through kube-apiserver), not the
	// bucket's: the CLI trusts the cluster's CA for them (--cacert, or
	// velero client config set cacert=), as for any custom CA.
	step("the velero CLI reads the logs and the details through the server", func(t *testing.T) {
		wants("backup logs", velero("backup", "logs", "sealed-1", "--cacert", c.CAFile()), "Backup completed")
		wants("backup describe --details", velero("backup", "describe", "sealed-1", "--details", "--colorized=false", "--cacert", c.CAFile()), "Phase: Completed", "v1/Secret:", ns+"/db")
	})

	step("a key added: the next backup is encrypted to it, and both restore", func(t *testing.T) {
		if _, err := c.Kube.CoreV1().Secrets(adminNamespace).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sealed-keys"}, Data: keys(k1, k2)}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		objects := backup(t, "sealed-2")
		if _, err := open(objects["sealed-2.tar.gz"], k1); err == nil {
			t.Error("the old key opens the backup made after the rotation")
		}
		if _, err := open(objects["sealed-2.tar.gz"], k2); err != nil {
			t.Errorf("the new key does not open the backup made after the rotation: %v", err)
		}
		for _, b := range []string{"sealed-1", "sealed-2"} {
			into := b + "-restored"
			wants("restore create --wait", velero("restore", "create", into, "--from-backup", b, "--namespace-mappings", ns+":"+into, "--wait"),
				"Restore completed with status: Completed")
			s, err := c.Kube.CoreV1().Secrets(into).Get(ctx, "db", metav1.GetOptions{})
			if err != nil || string(s.Data["password"]) != value {
				t.Errorf("the Secret restored from %s: %v", b, err)
			}
		}
	})
}
