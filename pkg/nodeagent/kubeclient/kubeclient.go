package kubeclient

import (
	"context"
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

// Credentials are a loaded kubeconfig: the REST config and, when it names
// client certificate files, the key pair read from them while loading, so
// that start-up reads the files once. New follows their rotation from there.
type Credentials struct {
	Config *rest.Config
	// keyPair is nil when Config names no certificate files.
	keyPair *keyPair
}

// CredentialsFor makes Credentials of a REST config built without Load,
// reading the key pair it names in files, if any.
func CredentialsFor(cfg *rest.Config) (Credentials, error) {
	if !namesCertificateFiles(cfg) {
		return Credentials{Config: cfg}, nil
	}
	pair, err := readKeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{Config: cfg, keyPair: &pair}, nil
}

// namesCertificateFiles reports whether cfg authenticates with certificate
// files, the kubelet's rotating kubelet-client-current.pem, rather than
// with inline data or not by certificate at all.
func namesCertificateFiles(cfg *rest.Config) bool {
	return cfg.CertFile != "" && cfg.KeyFile != "" && len(cfg.CertData) == 0 && len(cfg.KeyData) == 0
}

// User is the user the client certificate authenticates as (its CN), or ""
// without certificate files.
func (c Credentials) User() string {
	if c.keyPair == nil {
		return ""
	}
	return c.keyPair.leaf.Subject.CommonName
}

// Load reads a kubeconfig and checks that its credentials can be used now.
// Missing files (TLS bootstrap not done) give an error wrapping ErrNotReady;
// anything else is a plain error.
func Load(kubeconfig string) (Credentials, error) {
	if _, err := os.Stat(kubeconfig); errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, fmt.Errorf("%w: kubeconfig %s does not exist yet", ErrNotReady, kubeconfig)
	}
	// clientcmd refuses a kubeconfig whose certificate files are missing;
	// look first, to tell "not yet" from "broken".
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return Credentials{}, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	if err := clientcmd.ResolveLocalPaths(raw); err != nil {
		return Credentials{}, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	if kubeContext := raw.Contexts[raw.CurrentContext]; kubeContext != nil {
		if auth := raw.AuthInfos[kubeContext.AuthInfo]; auth != nil {
			for _, path := range []string{auth.ClientCertificate, auth.ClientKey} {
				if path == "" {
					continue
				}
				if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
					return Credentials{}, fmt.Errorf("%w: client certificate file %s does not exist yet", ErrNotReady, path)
				}
			}
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return Credentials{}, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	creds, err := CredentialsFor(cfg)
	if err != nil {
		// A file being replaced right now reads as garbage for a moment;
		// waiting is right for that too.
		return Credentials{}, fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	return creds, nil
}

// WaitForConfig loads the kubeconfig, waiting with backoff while the
// kubelet's credentials are not there yet. Other errors end the wait.
// status, when not nil, tells /readyz what it waits for.
func WaitForConfig(ctx context.Context, kubeconfig string, backoff wait.Backoff, status *Status) (Credentials, error) {
	logger := klog.FromContext(ctx)
	var creds Credentials
	var lastErr error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		creds, lastErr = Load(kubeconfig)
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
			return Credentials{}, lastErr
		}
		return Credentials{}, fmt.Errorf("waiting for the kubelet's credentials: %w (last: %v)", err, lastErr)
	}
	return creds, nil
}

// CheckIdentity warns when the certificate is not the node's: every write
// to the Node would then be refused.
func CheckIdentity(ctx context.Context, creds Credentials, nodeName string) {
	user := creds.User()
	if user == "" {
		return
	}
	if want := contract.NodeUserPrefix + nodeName; user != want {
		klog.FromContext(ctx).Error(nil, "The client certificate is not this node's; the apiserver will refuse the agent's writes", "certificateUser", user, "expected", want)
	}
}
