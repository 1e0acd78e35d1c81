// Package serverstatus answers velero.io ServerStatusRequests, which the
// velero CLI creates for `velero version` and waits on: a new request is
// marked Processed with the server version and its plugins, and processed
// requests are deleted after a TTL, as Velero's server does.
package serverstatus

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/reconcile"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// Name is the engine's name (--disable-controllers, field manager).
const Name = "server-status-request"

// TTL is how long a processed request is kept (Velero: one minute).
const TTL = time.Minute

// Controller processes ServerStatusRequests.
type Controller struct {
	*reconcile.Loop
	client  versioned.Interface
	lister  listers.ServerStatusRequestLister
	clock   clock.Clock
	version string
	plugins []velerov1.PluginInfo
	// Observers are told about the phase transitions the engine writes
	// (Events, metrics).
	Observers []status.Observer
}

// New returns a controller fed by informer.
func New(client versioned.Interface, informer informers.ServerStatusRequestInformer, clk clock.Clock, version string, plugins []velerov1.PluginInfo) (*Controller, error) {
	c := &Controller{client: client, lister: informer.Lister(), clock: clk, version: version, plugins: plugins}
	c.Loop = reconcile.NewLoop("serverstatusrequests", c.sync)
	if err := c.Watch(informer.Informer()); err != nil {
		return nil, err
	}
	return c, nil
}

// sync answers a new request or deletes an expired one.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	req, err := c.lister.ServerStatusRequests(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch req.Status.Phase {
	case "", velerov1.ServerStatusRequestPhaseNew:
		now := metav1.Time{Time: c.clock.Now()}
		_, err := status.Writer{Engine: Name, Observers: c.Observers}.ServerStatusRequests(c.client, key.Namespace).Update(ctx, req, func(cur *velerov1.ServerStatusRequest) {
			if cur.Status.Phase == "" || cur.Status.Phase == velerov1.ServerStatusRequestPhaseNew {
				cur.Status.Phase = velerov1.ServerStatusRequestPhaseProcessed
				cur.Status.ServerVersion = c.version
				cur.Status.ProcessedTimestamp = &now
				cur.Status.Plugins = c.plugins
			}
		})
		if status.Gone(err) {
			return nil
		}
		if err != nil {
			return err
		}
		c.AddAfter(key, TTL)
	case velerov1.ServerStatusRequestPhaseProcessed:
		if req.Status.ProcessedTimestamp == nil {
			return nil
		}
		if left := req.Status.ProcessedTimestamp.Add(TTL).Sub(c.clock.Now()); left > 0 {
			c.AddAfter(key, left)
			return nil
		}
		return reconcile.DeleteIfUnchanged(ctx, c.client.VeleroV1().ServerStatusRequests(key.Namespace).Delete, key.Name, req.UID)
	}
	return nil
}
