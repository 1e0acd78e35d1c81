package pebble

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/storage"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
)

var announceOnce sync.Once

// announceProgressRequests tells the apiserver's process-wide storage feature
// checker that the backend answers RequestWatchProgress. The watch cache
// consults that checker (named for etcd) before serving consistent reads and
// watch-list streams from memory. The checker learns support from a client
// reporting a server version; this backend reports the first etcd version
// whose progress requests behave correctly, which is what the pebble
// backend implements.
func announceProgressRequests() {
	announceOnce.Do(func() {
		etcdfeature.DefaultFeatureSupportChecker.CheckClient(context.Background(), progressCapableClient{}, storage.RequestWatchProgress)
	})
}

type progressCapableClient struct{}

func (progressCapableClient) Endpoints() []string { return []string{"pebble://embedded"} }

func (progressCapableClient) Status(context.Context, string) (*clientv3.StatusResponse, error) {
	return &clientv3.StatusResponse{Version: "3.6.0"}, nil
}
