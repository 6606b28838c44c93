package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/freeport"
)

// WebhookServiceAccount is the identity the webhook runs as, bound to the
// least RBAC in manifests/base.
const WebhookServiceAccount = "system:serviceaccount:nodeguard:nodeguard-webhook"

// Options shape an environment.
type Options struct {
	// WorkDir holds certificates, binaries and logs; required.
	WorkDir string
	// WebhookArgs are added to the webhook's command line.
	WebhookArgs []string
	// WithoutNodeRestriction leaves the in-tree NodeRestriction admission
	// plugin off, and installs manifests/overlays/standalone instead of
	// the base, so that nodeguard's own rules are the only ones judging
	// node writes, pods included.
	WithoutNodeRestriction bool
	// Settings, when set, is a NodeguardPolicy written to Env.SettingsFile
	// and passed as --settings; tests may rewrite the file with
	// WriteSettings to change the settings.
	Settings string
	// PolicyFiles are the webhook's Rego policies (file name -> content),
	// written into Env.PolicyDir and served with --policy-dir; tests may
	// change them with WritePolicyFile and RemovePolicyFile. Nil means
	// NeutralPolicyFiles; ShippedPolicyFiles gives the shipped ones.
	PolicyFiles map[string]string
	// PolicyData, when set, is written to a file and passed as
	// --policy-data (an object policies read as data.nodeguard.config).
	PolicyData string
	// AuthorizeEveryNodeRequest installs the opt-in authorization
	// configuration for a minimum kubelet version
	// (manifests/control-plane/authorization-config-min-kubelet-version.yaml),
	// which sends every request of a node to the webhook, instead of only
	// their ConfigMap requests.
	AuthorizeEveryNodeRequest bool
	// APIServerForWebhook, when set, is given the apiserver's URL once it
	// runs and returns the URL the webhook's kubeconfig points at instead,
	// e.g. a proxy (see Proxy) that a test can cut.
	APIServerForWebhook func(apiserverURL string) (string, error)
	// ControllerManager also runs kube-controller-manager beside the
	// apiserver (controlplane.Options.ControllerManager): the node lifecycle
	// controller marks the Node of a stopped kubelet Unknown after
	// controlplane.NodeMonitorGracePeriod (see WaitNodeNotReady), and
	// workloads get their pods, manifests/base's webhook Deployment and
	// agent DaemonSet included. Off by default: few suites need it, and it
	// changes what others see (pods bound to Nodes that do not exist are
	// deleted, a Node registered without a kubelet turns Unknown a minute
	// later and gets the unreachable taints).
	ControllerManager bool
	// Components are kustomize Components (directories) rendered with the
	// manifests, as an operator's own kustomization adds them: for
	// example the images component `make images` writes, which sets the
	// workloads' images.
	Components []string
	// Scheduler also runs kube-scheduler, which binds pods without a
	// spec.nodeName to a Node that fits, DaemonSets' pods included (without
	// it those stay Pending).
	Scheduler bool
	// Install, when set, installs nodeguard's in-cluster objects in place
	// of the kustomize rendering of manifests/ (Components and
	// WithoutNodeRestriction's overlay are then unused): helm install of
	// charts/nodeguard, say. It gets the administrator's credentials and
	// returns the objects it installed. Start then points the installed
	// ValidatingWebhookConfiguration at the webhook process, as it does
	// the rendered one.
	Install func(ctx context.Context, admin *rest.Config) ([]*unstructured.Unstructured, error)
}

// Env is a running environment.
type Env struct {
	CP    *controlplane.ControlPlane
	Admin kubernetes.Interface
	// WebhookURL is the webhook's base URL, https://127.0.0.1:PORT.
	WebhookURL string
	// ProbeClient reaches the webhook's health endpoints as the apiserver
	// would, with a client certificate.
	ProbeClient *http.Client
	// SettingsFile is the webhook's --settings, when Options.Settings
	// is set.
	SettingsFile string
	// PolicyDir is the webhook's --policy-dir.
	PolicyDir string
	// Manifests are the objects applied from the manifests, as applied
	// (the webhooks pointed at WebhookURL).
	Manifests []*unstructured.Unstructured

	dir     string
	binary  string
	args    []string
	logPath string

	mu      sync.Mutex
	webhook *exec.Cmd
	exited  chan struct{}

	nodesMu sync.Mutex
	// nodes are the nodes StartNode started here, stopped by Stop.
	nodes []*Node
}

// Start builds and starts everything. On error nothing is left running.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	if opts.WorkDir == "" {
		return nil, errors.New("framework: WorkDir is required")
	}
	e := &Env{dir: opts.WorkDir, logPath: filepath.Join(opts.WorkDir, "webhook.log")}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	webhook, err := buildPackages(ctx, opts.WorkDir, "./cmd/webhook")
	if err != nil {
		return nil, err
	}
	e.binary = webhook[0]
	port, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	e.WebhookURL = "https://127.0.0.1:" + strconv.Itoa(port)

	pki, err := newWebhookPKI(filepath.Join(opts.WorkDir, "webhook-pki"))
	if err != nil {
		return nil, err
	}
	e.ProbeClient = pki.apiserverClient()
	authzManifest := controlplane.AuthorizationConfigManifest
	if opts.AuthorizeEveryNodeRequest {
		authzManifest = controlplane.MinKubeletVersionAuthorizationConfigManifest
	}
	authzConfig, err := controlplane.WriteAuthorizationFilesFrom(opts.WorkDir, authzManifest, controlplane.WebhookKubeconfig{
		Server:         e.WebhookURL + "/authorize",
		CABundle:       pki.servingCA.CertPEM(),
		ClientCertFile: pki.apiserverCertFile,
		ClientKeyFile:  pki.apiserverKeyFile,
	})
	if err != nil {
		return nil, err
	}
	admissionConfig, err := writeAdmissionFiles(opts.WorkDir, "127.0.0.1:"+strconv.Itoa(port), pki.apiserverCertFile, pki.apiserverKeyFile)
	if err != nil {
		return nil, err
	}
	plugins := []string{"NodeRestriction"}
	if opts.WithoutNodeRestriction {
		plugins = nil
	}
	e.CP, err = controlplane.Start(ctx, controlplane.Options{
		WorkDir:                    filepath.Join(opts.WorkDir, "controlplane"),
		AuthorizationConfigFile:    authzConfig,
		AdmissionControlConfigFile: admissionConfig,
		EnableAdmissionPlugins:     plugins,
		ControllerManager:          opts.ControllerManager,
		Scheduler:                  opts.Scheduler,
	})
	if err != nil {
		return nil, err
	}
	if e.Admin, err = kubernetes.NewForConfig(e.CP.AdminConfig()); err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	if opts.Install != nil {
		if e.Manifests, err = installAndPoint(ctx, e.CP.AdminConfig(), opts.Install, e.WebhookURL, pki.servingCA.CertPEM()); err != nil {
			return nil, err
		}
	} else if e.Manifests, err = applyManifests(ctx, e.CP.AdminConfig(), opts, e.WebhookURL, pki.servingCA.CertPEM()); err != nil {
		return nil, err
	}
	webhookConfig, err := e.CP.UserConfig(WebhookServiceAccount, "system:serviceaccounts", "system:serviceaccounts:nodeguard")
	if err != nil {
		return nil, err
	}
	if opts.APIServerForWebhook != nil {
		if webhookConfig.Host, err = opts.APIServerForWebhook(webhookConfig.Host); err != nil {
			return nil, fmt.Errorf("apiserver address for the webhook: %w", err)
		}
	}
	kubeconfig := filepath.Join(opts.WorkDir, "webhook.kubeconfig")
	if err := controlplane.WriteKubeconfig(kubeconfig, webhookConfig); err != nil {
		return nil, err
	}
	e.args = []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + pki.servingCertFile,
		"--tls-private-key-file=" + pki.servingKeyFile,
		"--client-ca-file=" + pki.clientCAFile,
		"--kubeconfig=" + kubeconfig,
		"--shutdown-drain-duration=0s",
		"-v=2",
	}
	if opts.Settings != "" {
		e.SettingsFile = filepath.Join(opts.WorkDir, "policy.yaml")
		if err := e.WriteSettings(opts.Settings); err != nil {
			return nil, err
		}
		e.args = append(e.args, "--settings="+e.SettingsFile)
	}
	policyArgs, err := e.policyArgs(opts)
	if err != nil {
		return nil, err
	}
	e.args = append(e.args, policyArgs...)
	e.args = append(e.args, "--policy-reload-interval="+policyReloadInterval)
	// Last, so that a suite's own flags win.
	e.args = append(e.args, opts.WebhookArgs...)
	if err := e.StartWebhook(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// StartWebhook starts the webhook process and waits until it is ready.
func (e *Env) StartWebhook(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.webhook != nil {
		return errors.New("webhook already running")
	}
	logFile, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("webhook log: %w", err)
	}
	cmd := exec.Command(e.binary, e.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting webhook: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	e.webhook, e.exited = cmd, exited
	return e.waitReadyLocked(ctx)
}

func (e *Env) waitReadyLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		select {
		case <-e.exited:
			return fmt.Errorf("webhook exited before it was ready; log:\n%s", e.WebhookLogTail(30))
		case <-ctx.Done():
			return fmt.Errorf("webhook not ready: %w; log:\n%s", ctx.Err(), e.WebhookLogTail(30))
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := e.ProbeClient.Get(e.WebhookURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
}

// StopWebhook stops the webhook process (SIGTERM, then SIGKILL).
func (e *Env) StopWebhook() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.webhook == nil {
		return
	}
	_ = syscall.Kill(-e.webhook.Process.Pid, syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-e.webhook.Process.Pid, syscall.SIGKILL)
		<-e.exited
	}
	e.webhook = nil
}

// Stop ends everything Start and StartNode started: the nodes first, each
// agent and then its kubelet, all at once, as their units would be shut
// down (the kill that follows the test binary's end is the fallback, not
// the way out), then the webhook and the control plane.
func (e *Env) Stop() {
	e.nodesMu.Lock()
	nodes := e.nodes
	e.nodes = nil
	e.nodesMu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
	e.StopWebhook()
	if e.CP != nil {
		_ = e.CP.Stop()
	}
}

// WebhookLogTail returns the last lines of the webhook's log.
func (e *Env) WebhookLogTail(lines int) string {
	return tail(e.logPath, lines)
}

// NodeClient returns a client with the credentials of the kubelet on node.
func (e *Env) NodeClient(node string) (kubernetes.Interface, error) {
	cfg, err := e.CP.NodeConfig(node)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// NodeRESTConfig returns the kubelet credentials of node as a rest.Config.
func (e *Env) NodeRESTConfig(node string) (*rest.Config, error) { return e.CP.NodeConfig(node) }

// WriteSettings replaces the settings file (the NodeguardPolicy) atomically,
// as a ConfigMap volume update would.
func (e *Env) WriteSettings(content string) error {
	tmp := e.SettingsFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("writing the settings: %w", err)
	}
	if err := os.Rename(tmp, e.SettingsFile); err != nil {
		return fmt.Errorf("writing the settings: %w", err)
	}
	return nil
}
