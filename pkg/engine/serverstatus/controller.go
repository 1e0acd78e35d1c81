// Package serverstatus answers velero.io ServerStatusRequests, which the
// velero CLI creates for `velero version` and waits on: a new request is
// marked Processed with the server version and its plugins, and processed
// requests are deleted after a TTL, as Velero's server does.
package serverstatus

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	informers "github.com/backstop-io/backstop/pkg/generated/informers/externalversions/velero/v1"
	listers "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// TTL is how long a processed request is kept (Velero: one minute).
const TTL = time.Minute

// Controller processes ServerStatusRequests.
type Controller struct {
	client  versioned.Interface
	lister  listers.ServerStatusRequestLister
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[cache.ObjectName]
	clock   clock.Clock
	version string
	plugins []velerov1.PluginInfo
}

// New returns a controller fed by informer.
func New(client versioned.Interface, informer informers.ServerStatusRequestInformer, clk clock.Clock, version string, plugins []velerov1.PluginInfo) (*Controller, error) {
	c := &Controller{
		client:  client,
		lister:  informer.Lister(),
		synced:  informer.Informer().HasSynced,
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](), workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "serverstatusrequests"}),
		clock:   clk,
		version: version,
		plugins: plugins,
	}
	enqueue := func(obj any) {
		if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			c.queue.Add(name)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching server status requests: %w", err)
	}
	return c, nil
}

// Run processes requests until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	go wait.UntilWithContext(ctx, c.worker, time.Second)
	<-ctx.Done()
}

func (c *Controller) worker(ctx context.Context) {
	for c.next(ctx) {
	}
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Processing a server status request", "request", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
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
		req = req.DeepCopy()
		req.Status.Phase = velerov1.ServerStatusRequestPhaseProcessed
		req.Status.ServerVersion = c.version
		req.Status.ProcessedTimestamp = &metav1.Time{Time: c.clock.Now()}
		req.Status.Plugins = c.plugins
		if _, err := c.client.VeleroV1().ServerStatusRequests(key.Namespace).UpdateStatus(ctx, req, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("marking the request processed: %w", err)
		}
		c.queue.AddAfter(key, TTL)
	case velerov1.ServerStatusRequestPhaseProcessed:
		if req.Status.ProcessedTimestamp == nil {
			return nil
		}
		if left := req.Status.ProcessedTimestamp.Add(TTL).Sub(c.clock.Now()); left > 0 {
			c.queue.AddAfter(key, left)
			return nil
		}
		err := c.client.VeleroV1().ServerStatusRequests(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &req.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting the expired request: %w", err)
		}
	}
	return nil
}
