package controlplane

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Tests create objects in bursts; client-go's default of 5 QPS would make them wait on the
// client's own rate limiter rather than on the apiserver.
const (
	clientQPS   = 1000
	clientBurst = 2000
)

// AdminConfig returns a client config for "admin" in system:masters. Each call returns a new
// copy, free to modify.
func (cp *ControlPlane) AdminConfig() *rest.Config {
	return cp.configFor(cp.adminCert, cp.adminKey)
}

// UserConfig returns a client config authenticating as user with the given groups, through a
// client certificate freshly issued by the control plane's CA.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := cp.ca.IssueClientCert(user, groups...)
	if err != nil {
		return nil, err
	}
	return cp.configFor(certPEM, keyPEM), nil
}

// NodeConfig returns a client config with the credentials a kubelet on nodeName would have:
// user system:node:<nodeName> in group system:nodes.
func (cp *ControlPlane) NodeConfig(nodeName string) (*rest.Config, error) {
	if nodeName == "" {
		return nil, errors.New("a node identity needs a node name")
	}
	return cp.UserConfig("system:node:"+nodeName, "system:nodes")
}

func (cp *ControlPlane) configFor(certPEM, keyPEM []byte) *rest.Config {
	return &rest.Config{
		Host: cp.URL(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.ca.CertPEM(),
			CertData: certPEM,
			KeyData:  keyPEM,
		},
		QPS:   clientQPS,
		Burst: clientBurst,
	}
}

// WriteKubeconfig writes cfg as a kubeconfig file at path (mode 0600), with the certificates
// embedded, for programs that take --kubeconfig. Only TLS client certificate and bearer token
// credentials are carried over.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	if cfg == nil || cfg.Host == "" {
		return errors.New("writing kubeconfig: the config has no host")
	}
	if len(cfg.CAData) == 0 && cfg.CAFile == "" {
		// Our apiserver's certificate is signed by a throwaway CA; without it no client
		// could connect, so say so now rather than on first use.
		return errors.New("writing kubeconfig: the config has neither CA data nor a CA file")
	}
	const name = "nodeguard"
	kubeconfig := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {
			Server:                   cfg.Host,
			CertificateAuthorityData: cfg.CAData,
			CertificateAuthority:     cfg.CAFile,
			TLSServerName:            cfg.ServerName,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{name: {
			ClientCertificateData: cfg.CertData,
			ClientCertificate:     cfg.CertFile,
			ClientKeyData:         cfg.KeyData,
			ClientKey:             cfg.KeyFile,
			Token:                 cfg.BearerToken,
			TokenFile:             cfg.BearerTokenFile,
		}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: name}},
		CurrentContext: name,
	}
	if err := clientcmd.WriteToFile(kubeconfig, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
