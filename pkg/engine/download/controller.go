package download

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// Name is the engine's name (--disable-controllers, field manager).
const Name = "download-request"

// TTL is how long a download link, and its processed request, live
// (Velero: ten minutes).
const TTL = 10 * time.Minute

// Controller processes DownloadRequests.
type Controller struct {
	*reconcile.Loop
	client   versioned.Interface
	requests listers.DownloadRequestLister
	backups  listers.BackupLister
	restores listers.RestoreLister
	links    Links
	clock    clock.Clock
	// Observers are told about the phase transitions the engine writes
	// (Events, metrics).
	Observers []status.Observer
}

// Informers are what the controller reads.
type Informers struct {
	Requests informers.DownloadRequestInformer
	Backups  informers.BackupInformer
	Restores informers.RestoreInformer
}

// New returns the controller; links are made by links.
func New(client versioned.Interface, inf Informers, links Links, clk clock.Clock) (*Controller, error) {
	c := &Controller{
		client: client, requests: inf.Requests.Lister(), backups: inf.Backups.Lister(), restores: inf.Restores.Lister(),
		links: links, clock: clk,
	}
	c.Loop = reconcile.NewLoop("downloadrequests", c.sync)
	if err := c.Watch(inf.Requests.Informer()); err != nil {
		return nil, err
	}
	// The target lookups need synced caches too.
	c.WaitFor(inf.Backups.Informer(), inf.Restores.Informer())
	return c, nil
}

func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	req, err := c.requests.DownloadRequests(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	now := c.clock.Now()
	switch req.Status.Phase {
	case "", velerov1.DownloadRequestPhaseNew:
		location, err := c.locationOf(key.Namespace, req.Spec.Target)
		if err != nil {
			return err
		}
		expires := now.Add(TTL)
		_, err = status.Writer{Engine: Name, Observers: c.Observers}.DownloadRequests(c.client, key.Namespace).Update(ctx, req, func(cur *velerov1.DownloadRequest) {
			if cur.Status.Phase == "" || cur.Status.Phase == velerov1.DownloadRequestPhaseNew {
				cur.Status.Phase = velerov1.DownloadRequestPhaseProcessed
				cur.Status.DownloadURL = c.links.For(Link{Namespace: key.Namespace, Request: key.Name, UID: cur.UID, Location: location,
					Kind: cur.Spec.Target.Kind, Name: cur.Spec.Target.Name, SecretsOf: secretsOf(cur)}, expires)
				cur.Status.Expiration = &metav1.Time{Time: expires}
			}
		})
		if status.Gone(err) {
			return nil
		}
		if err != nil {
			return err
		}
		c.AddAfter(key, TTL)
	case velerov1.DownloadRequestPhaseProcessed:
		if req.Status.Expiration == nil {
			return nil
		}
		if left := req.Status.Expiration.Sub(now); left > 0 {
			c.AddAfter(key, left)
			return nil
		}
		return reconcile.DeleteIfUnchanged(ctx, c.client.VeleroV1().DownloadRequests(key.Namespace).Delete, key.Name, req.UID)
	}
	return nil
}

// locationOf is the storage location holding a target's files: the
// backup's, or for a restore the location of the backup it restores. ""
// when the backup is unknown or has no location (the link then answers 404).
func (c *Controller) locationOf(namespace string, target velerov1.DownloadTarget) (string, error) {
	backupName := target.Name
	if objectstore.IsRestoreTarget(target.Kind) {
		r, err := c.restores.Restores(namespace).Get(target.Name)
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		backupName = r.Spec.BackupName
	}
	b, err := c.backups.Backups(namespace).Get(backupName)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return b.Spec.StorageLocation, nil
}

// secretsOf is the namespace whose Secrets the file of a tenant's request
// holds (its backup's contents), "" for every other request: the admin's
// links stay bearer links, as Velero's pre-signed URLs are; a tenant's
// contents link opens only for a user who may get the tenant namespace's
// Secrets, so that a user who may read the NonAdminDownloadRequest (view)
// obtains nothing through it.
func secretsOf(r *velerov1.DownloadRequest) string {
	if r.Spec.Target.Kind != velerov1.DownloadTargetKindBackupContents || r.Labels[oadpv1alpha1.NadrOriginNACUUIDLabel] == "" {
		return ""
	}
	return r.Annotations[oadpv1alpha1.NadrOriginNamespaceAnnotation]
}
