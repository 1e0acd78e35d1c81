package server

import (
	"context"
	"fmt"
	"net"
	"os"

	"k8s.io/apimachinery/pkg/util/sets"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/backstop-io/backstop/artifacts"
	"github.com/backstop-io/backstop/pkg/apiserver"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	backstopopenapi "github.com/backstop-io/backstop/pkg/generated/openapi"
	"github.com/backstop-io/backstop/pkg/standalone/authz"
	"github.com/backstop-io/backstop/pkg/standalone/pki"
	"github.com/backstop-io/backstop/pkg/storage/pebble"
	"github.com/backstop-io/backstop/pkg/version"
)

// clusterCA is the CA certificate (PEM) a client config verifies its
// server with, or nil when it trusts the system's roots.
func clusterCA(cfg *rest.Config) ([]byte, error) {
	c := rest.CopyConfig(cfg)
	if err := rest.LoadTLSFiles(c); err != nil {
		return nil, fmt.Errorf("reading the host cluster's CA: %w", err)
	}
	return c.TLSClientConfig.CAData, nil
}

// Run resolves the flags (Config), then acts: it sets the garbage
// collector (memory.go), creates the data
// directory and locks it, opens the storage, makes or reads the
// certificates, listens, reaches the host cluster (aggregated), starts the
// server, writes the admin kubeconfig (standalone) and serves until ctx is
// done.
func (o *Options) Run(ctx context.Context) error {
	c, err := o.Config()
	if err != nil {
		return err
	}
	memory, err := resolveMemory(o.GCPercent, o.MemoryLimit, os.Getenv, "/sys/fs/cgroup")
	if err != nil {
		return err
	}
	memory.apply()
	if err := os.MkdirAll(c.Extra.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating the data directory: %w", err)
	}
	identity, unlock, err := replicaIdentity(c.Extra.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	extra := c.Extra
	if c.Pebble != nil {
		backend, err := pebble.NewBackend(*c.Pebble)
		if err != nil {
			return fmt.Errorf("opening the storage in %s: %w", c.Extra.DataDir, err)
		}
		defer func() {
			if err := backend.Close(); err != nil {
				klog.ErrorS(err, "Closing the storage")
			}
		}()
		extra.Backend = backend
	}

	scheme := extra.Scheme
	cfg := genericapiserver.NewRecommendedConfig(extra.Codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	cfg.FeatureGate = utilfeature.DefaultFeatureGate
	cfg.OpenAPIConfig, cfg.OpenAPIV3Config = apiserver.OpenAPIConfigs(backstopopenapi.GetOpenAPIDefinitions, scheme, version.Version)

	if c.Etcd != nil {
		// etcd's health and readiness checks, encryption at rest if
		// configured; the REST options are Backstop's (apiserver.Config).
		if err := c.Etcd.ApplyTo(&cfg.Config); err != nil {
			return fmt.Errorf("configuring etcd: %w", err)
		}
		extra.Etcd = &c.Etcd.StorageConfig
	}
	var ca *pki.CA
	if c.Mode == ModeStandalone {
		if ca, err = o.standaloneServing(); err != nil {
			return err
		}
		// Priority and fairness needs a kube-apiserver's flowcontrol API.
		o.Features.EnablePriorityAndFairness = false
	} else if err := o.aggregatedServing(); err != nil {
		return err
	}
	if o.SecureServing.BindPort == 0 && o.SecureServing.Listener == nil {
		// Port 0: pick a free port now, so the kubeconfig can name it.
		addr := net.JoinHostPort(o.SecureServing.BindAddress.String(), "0")
		if o.SecureServing.Listener, o.SecureServing.BindPort, err = genericoptions.CreateListener("tcp", addr, net.ListenConfig{}); err != nil {
			return fmt.Errorf("listening on %s: %w", addr, err)
		}
	}
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return fmt.Errorf("configuring serving: %w", err)
	}
	// The engines' watches and lists never leave the process: gzip there
	// only costs each watch a compressor on the server's side and a
	// decompressor on the engine's (about 1 MiB between them, idle).
	cfg.LoopbackClientConfig.DisableCompression = true
	if err := o.Audit.ApplyTo(&cfg.Config); err != nil {
		return fmt.Errorf("configuring audit: %w", err)
	}
	var kubeClient kubernetes.Interface
	if c.Mode == ModeAggregated {
		if err := o.CoreAPI.ApplyTo(cfg); err != nil {
			return fmt.Errorf("configuring the host cluster client: %w", err)
		}
		if kubeClient, err = kubernetes.NewForConfig(cfg.ClientConfig); err != nil {
			return fmt.Errorf("host cluster client: %w", err)
		}
	}
	if err := o.Features.ApplyTo(&cfg.Config, kubeClient, cfg.SharedInformerFactory); err != nil {
		return fmt.Errorf("configuring features: %w", err)
	}
	var rbac *authz.RBAC
	switch c.Mode {
	case ModeStandalone:
		clientCA, err := dynamiccertificates.NewStaticCAContent("backstop-ca", ca.CertPEM)
		if err != nil {
			return fmt.Errorf("loading the client CA: %w", err)
		}
		cfg.SecureServing.ClientCA = clientCA
		cfg.Authentication.Authenticator = apiserver.StandaloneAuthenticator(clientCA)
		served := sets.New[string]()
		for _, gv := range scheme.PrioritizedVersionsAllGroups() {
			served.Insert(gv.Group)
		}
		// The core group holds only the meta types here: no pods, secrets, ...
		served.Delete("")
		policy, err := authz.DefaultPolicy(artifacts.ClusterRoles, served)
		if err != nil {
			return fmt.Errorf("building the bootstrap RBAC policy: %w", err)
		}
		if rbac, err = authz.New(cfg.LoopbackClientConfig, policy); err != nil {
			return err
		}
		if cfg.Authorization.Authorizer, err = apiserver.StandaloneAuthorizer(rbac.Authorizer); err != nil {
			return fmt.Errorf("building the authorizer: %w", err)
		}
	case ModeAggregated:
		// Download links carry their own signature; the caller has no credentials.
		o.Authorization.AlwaysAllowPaths = append(o.Authorization.AlwaysAllowPaths, apiserver.PublicPaths()...)
		if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, cfg.OpenAPIConfig); err != nil {
			return fmt.Errorf("configuring delegated authentication: %w", err)
		}
		if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
			return fmt.Errorf("configuring delegated authorization: %w", err)
		}
	}

	extra.RBAC = rbac
	if extra.Election != nil {
		election := *extra.Election
		election.Identity, election.Metrics = identity, leader.NewMetrics(legacyregistry.MustRegister)
		extra.Election = &election
		if kubeClient != nil {
			// Aggregated: the Lease is the host cluster's, reached by the
			// elector through a client of its own (renewals never wait
			// behind the fence's reads) and by the fence at the engines'
			// rate (one read per engine write).
			elector, err := kubernetes.NewForConfig(cfg.ClientConfig)
			if err != nil {
				return fmt.Errorf("lease client: %w", err)
			}
			fenceConfig := rest.CopyConfig(cfg.ClientConfig)
			fenceConfig.QPS, fenceConfig.Burst = extra.EngineQPS, extra.EngineBurst
			fence, err := kubernetes.NewForConfig(fenceConfig)
			if err != nil {
				return fmt.Errorf("lease client: %w", err)
			}
			extra.Election.Leases, extra.Election.Fence = elector.CoordinationV1(), fence.CoordinationV1()
		}
	}
	if kubeClient != nil {
		// Aggregated: storage locations' Secrets are the host cluster's, and
		// transitions are Events there.
		extra.Opener.Secrets = secretReader(kubeClient)
		extra.Events = kubeClient.CoreV1()
		extra.Secrets = kubeClient.CoreV1()
		extra.HostCluster = rest.CopyConfig(cfg.ClientConfig)
	}
	switch {
	case c.SourceKubeconfig != "":
		if extra.Source, err = clientcmd.BuildConfigFromFlags("", c.SourceKubeconfig); err != nil {
			return fmt.Errorf("loading --source-kubeconfig: %w", err)
		}
	case c.Mode == ModeAggregated:
		extra.Source = rest.CopyConfig(cfg.ClientConfig)
	}
	if ca != nil {
		extra.ServingCA, extra.LinkCA = ca.CertPEM, ca.CertPEM
		if extra.ExternalURL == "" {
			extra.ExternalURL = o.serverURL()
		}
	} else {
		// Aggregated: the self-signed serving certificate is its own CA.
		if extra.ServingCA, err = os.ReadFile(o.SecureServing.ServerCert.CertKey.CertFile); err != nil {
			return fmt.Errorf("reading the serving certificate: %w", err)
		}
		// Download links go through kube-apiserver, verified with its CA.
		if extra.LinkCA, err = clusterCA(cfg.ClientConfig); err != nil {
			return err
		}
		if extra.ExternalURL == "" {
			extra.ExternalURL = cfg.ClientConfig.Host
		}
	}
	config := &apiserver.Config{GenericConfig: cfg, Extra: extra}
	server, err := config.Complete().New()
	if err != nil {
		return err
	}
	if ca != nil {
		path, err := pki.WriteAdminKubeconfig(c.Extra.DataDir, ca, o.serverURL())
		if err != nil {
			return fmt.Errorf("writing the admin kubeconfig: %w", err)
		}
		klog.InfoS("Standalone server", "url", o.serverURL(), "kubeconfig", path)
	}
	return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}
