// Command csi-registrar registers a CSI driver with kubelet, the job of
// kubernetes-csi's node-driver-registrar (whose module the Go module
// proxy does not serve): it serves kubelet's plugin registration API on
// a socket in kubelet's plugins_registry directory, naming the driver and
// its endpoint; kubelet then calls the driver's node service there and
// records the driver in the node's CSINode. The harness's nodes run it
// beside the CSI driver.
//
//	csi-registrar -registry /var/lib/kubelet/plugins_registry -driver hostpath.csi.k8s.io -endpoint /path/csi.sock
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registration answers kubelet's plugin watcher for one CSI driver.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	driver, endpoint string
}

func (r registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.driver, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r registration) NotifyRegistrationStatus(_ context.Context, status *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !status.PluginRegistered {
		log.Printf("kubelet did not register %s: %s", r.driver, status.Error)
	} else {
		log.Printf("kubelet registered %s", r.driver)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func main() {
	registry := flag.String("registry", "/var/lib/kubelet/plugins_registry", "kubelet's plugin registration directory")
	driver := flag.String("driver", "", "the CSI driver's name")
	endpoint := flag.String("endpoint", "", "the driver's unix socket, as kubelet reaches it")
	flag.Parse()
	if *driver == "" || *endpoint == "" {
		fmt.Fprintln(os.Stderr, "csi-registrar: -driver and -endpoint are required")
		os.Exit(2)
	}
	if err := run(*registry, *driver, *endpoint); err != nil {
		log.Fatal(err)
	}
}

func run(registry, driver, endpoint string) error {
	if err := os.MkdirAll(registry, 0o750); err != nil {
		return err
	}
	sock := filepath.Join(registry, driver+"-reg.sock")
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	server := grpc.NewServer()
	registerapi.RegisterRegistrationServer(server, registration{driver: driver, endpoint: endpoint})
	// Gone with its socket: kubelet then deregisters the driver.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		server.Stop()
	}()
	log.Printf("serving the registration of %s (%s) on %s", driver, endpoint, sock)
	err = server.Serve(l)
	_ = os.Remove(sock)
	return err
}
