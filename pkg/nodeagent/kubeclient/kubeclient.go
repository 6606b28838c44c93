package kubeclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// DefaultBackoff is how WaitForConfig retries: from 1s, doubling, at most
// 30s apart, forever (until the context ends).
var DefaultBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}

// ErrNotReady wraps the reason a kubeconfig cannot be used yet.
var ErrNotReady = errors.New("the kubelet's credentials are not ready")

// Load reads a kubeconfig and checks that its credentials can be used now.
// Missing files (TLS bootstrap not done) give an error wrapping ErrNotReady;
// anything else is a plain error.
func Load(kubeconfig string) (*rest.Config, error) {
	if _, err := os.Stat(kubeconfig); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: kubeconfig %s does not exist yet", ErrNotReady, kubeconfig)
	}
	// clientcmd refuses a kubeconfig whose certificate files are missing;
	// look first, to tell "not yet" from "broken".
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	if err := clientcmd.ResolveLocalPaths(raw); err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	if kubeContext := raw.Contexts[raw.CurrentContext]; kubeContext != nil {
		if auth := raw.AuthInfos[kubeContext.AuthInfo]; auth != nil {
			for _, path := range []string{auth.ClientCertificate, auth.ClientKey} {
				if path == "" {
					continue
				}
				if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("%w: client certificate file %s does not exist yet", ErrNotReady, path)
				}
			}
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	if cfg.CertFile == "" && cfg.KeyFile == "" {
		return cfg, nil
	}
	if _, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile); err != nil {
		// A file being replaced right now reads as garbage for a moment;
		// waiting is right for that too.
		return nil, fmt.Errorf("%w: client certificate %s: %v", ErrNotReady, cfg.CertFile, err)
	}
	return cfg, nil
}

// WaitForConfig loads the kubeconfig, waiting with backoff while the
// kubelet's credentials are not there yet. Other errors end the wait.
// status, when not nil, tells /readyz what it waits for.
func WaitForConfig(ctx context.Context, kubeconfig string, backoff wait.Backoff, status *Status) (*rest.Config, error) {
	logger := klog.FromContext(ctx)
	var cfg *rest.Config
	var lastErr error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		cfg, lastErr = Load(kubeconfig)
		switch {
		case lastErr == nil:
			status.setLoaded()
			return true, nil
		case errors.Is(lastErr, ErrNotReady):
			status.setWaiting(lastErr)
			logger.Info("Waiting for the kubelet's credentials (TLS bootstrap not finished?); running from checkpoints meanwhile", "reason", lastErr.Error())
			return false, nil
		default:
			return false, lastErr
		}
	})
	if err != nil {
		if lastErr != nil && !errors.Is(lastErr, ErrNotReady) {
			return nil, lastErr
		}
		return nil, fmt.Errorf("waiting for the kubelet's credentials: %w (last: %v)", err, lastErr)
	}
	return cfg, nil
}

// CertificateUser returns the user a client certificate file authenticates
// as (its CN), or "" when cfg has no certificate file.
func CertificateUser(cfg *rest.Config) (string, error) {
	if cfg.CertFile == "" {
		return "", nil
	}
	pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return "", fmt.Errorf("reading client certificate %s: %w", cfg.CertFile, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return "", fmt.Errorf("parsing client certificate %s: %w", cfg.CertFile, err)
	}
	return leaf.Subject.CommonName, nil
}

// CheckIdentity warns when the certificate is not the node's: every write
// to the Node would then be refused.
func CheckIdentity(ctx context.Context, cfg *rest.Config, nodeName string) {
	user, err := CertificateUser(cfg)
	if err != nil || user == "" {
		return
	}
	if want := contract.NodeUserPrefix + nodeName; user != want {
		klog.FromContext(ctx).Error(nil, "The client certificate is not this node's; the apiserver will refuse the agent's writes", "certificateUser", user, "expected", want)
	}
}
