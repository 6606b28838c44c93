package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/keyutil"
)

// KubernetesVersion is the kube-apiserver version hack/testbin.sh builds (from
// hack/tools/kube/go.mod); it names the directory the binaries are cached in.
const KubernetesVersion = "v1.37.2"

const (
	defaultReadyTimeout = 2 * time.Minute
	pollInterval        = 100 * time.Millisecond
	// startAttempts bounds retries when a port chosen as free was taken before we bound it.
	startAttempts = 3
	logTailLines  = 40
)

// Options configure a control plane. The zero value gives kube-apiserver with Node,RBAC
// authorization and its default admission plugins (minus ServiceAccount, see Start).
type Options struct {
	// BinDir holds the etcd and kube-apiserver binaries; empty means DefaultBinDir().
	BinDir string
	// WorkDir receives certificates, the etcd data and the processes' logs (etcd.log,
	// kube-apiserver.log). Empty means a new temporary directory, removed by Stop; a directory
	// given here is left in place.
	WorkDir string
	// AuthorizationConfigFile is passed as --authorization-config; empty means
	// --authorization-mode=Node,RBAC. See WriteAuthorizationFiles.
	AuthorizationConfigFile string
	// AdmissionControlConfigFile is passed as --admission-control-config-file.
	AdmissionControlConfigFile string
	// EnableAdmissionPlugins are added to the default set, e.g. NodeRestriction.
	EnableAdmissionPlugins []string
	// ExtraAPIServerArgs come last on the command line, so a single-valued flag given here
	// overrides ours (list-valued flags accumulate instead).
	ExtraAPIServerArgs []string
	// ReadyTimeout bounds each wait for etcd or the apiserver to become ready; zero means two
	// minutes, enough for a busy two-core machine.
	ReadyTimeout time.Duration
	// ControllerManager also runs kube-controller-manager (see components.go for its flags):
	// Deployments and DaemonSets get their pods, Nodes whose kubelet stops renewing its Lease
	// turn Unknown after NodeMonitorGracePeriod, namespaces get their "default"
	// ServiceAccount. Mind what else it does: pods bound to a Node that does not exist are
	// deleted by its pod garbage collector, and a Node that never reports Ready (one
	// registered without a kubelet) turns Unknown a minute after it is created.
	ControllerManager bool
	// Scheduler also runs kube-scheduler, with its default profile, so pods without a
	// spec.nodeName get bound to a Node that fits them.
	Scheduler bool
	// ExtraControllerManagerArgs and ExtraSchedulerArgs come last on their command lines, as
	// ExtraAPIServerArgs do.
	ExtraControllerManagerArgs []string
	ExtraSchedulerArgs         []string
}

// ControlPlane is a running etcd and kube-apiserver on loopback. Its methods are safe for
// concurrent use.
type ControlPlane struct {
	binDir       string
	workDir      string
	ownsWorkDir  bool
	readyTimeout time.Duration
	opts         Options
	ca           *CA
	adminCert    []byte
	adminKey     []byte
	adminHTTP    *http.Client
	etcdURL      string
	// apiserverPort stays fixed once chosen, so a restarted apiserver keeps its URL.
	apiserverPort int

	// mu serialises starting and stopping, and guards the fields below. (Start touches them
	// without it, before anyone else can see cp.)
	mu        sync.Mutex
	etcd      *process
	apiserver *process
	stopped   bool

	// Started with Options.ControllerManager and Options.Scheduler; the ports are fixed once
	// Start returns.
	controllerManager     *process
	controllerManagerPort int
	scheduler             *process
	schedulerPort         int
}

// DefaultBinDir is where hack/testbin.sh puts the binaries: $NODEGUARD_BIN_DIR, else
// $XDG_CACHE_HOME/nodeguard/bin/<version>, else ~/.cache/nodeguard/bin/<version>. It follows the
// XDG rule on every OS, as the script does, rather than os.UserCacheDir.
func DefaultBinDir() string {
	if dir := os.Getenv("NODEGUARD_BIN_DIR"); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			// No home: a relative path fails later with the "run make testbin" advice.
			home = "."
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "nodeguard", "bin", KubernetesVersion)
}

// Start runs etcd and kube-apiserver (and kube-controller-manager and kube-scheduler, when
// opts ask for them) and returns once /readyz answers ok (and their /healthz). ctx bounds only the
// start; the processes run until Stop. If Start fails, nothing it started is left running and
// the error carries the tail of the failing process's log.
//
// The ServiceAccount admission plugin is disabled unless enabled explicitly: without a
// controller-manager no "default" ServiceAccount is ever created, and it would refuse every Pod.
// With one it stays off too, since a Pod created right after its namespace would be refused
// until the controller catches up.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	cp := &ControlPlane{binDir: opts.BinDir, workDir: opts.WorkDir, readyTimeout: opts.ReadyTimeout, opts: opts}
	if cp.binDir == "" {
		cp.binDir = DefaultBinDir()
	}
	if cp.readyTimeout <= 0 {
		cp.readyTimeout = defaultReadyTimeout
	}
	binaries := []string{"etcd", "kube-apiserver"}
	if opts.ControllerManager {
		binaries = append(binaries, "kube-controller-manager")
	}
	if opts.Scheduler {
		binaries = append(binaries, "kube-scheduler")
	}
	for _, name := range binaries {
		if err := checkBinary(filepath.Join(cp.binDir, name)); err != nil {
			return nil, err
		}
	}
	if cp.workDir == "" {
		dir, err := os.MkdirTemp("", "nodeguard-controlplane-")
		if err != nil {
			return nil, fmt.Errorf("creating a work directory: %w", err)
		}
		cp.workDir, cp.ownsWorkDir = dir, true
	} else if err := os.MkdirAll(cp.workDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating work directory: %w", err)
	}

	if err := cp.start(ctx); err != nil {
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return cp, nil
}

func checkBinary(path string) error {
	info, err := os.Stat(path)
	if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is missing or not executable: run `make testbin` (or hack/testbin.sh) to build it, or point NODEGUARD_BIN_DIR at a directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and fakecri", path)
	}
	return nil
}

// Binary returns the path of one of the binaries hack/testbin.sh builds
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
// fakecri) in DefaultBinDir, or an error
// that says how to build it.
func Binary(name string) (string, error) {
	path := filepath.Join(DefaultBinDir(), name)
	if err := checkBinary(path); err != nil {
		return "", err
	}
	return path, nil
}

func (cp *ControlPlane) start(ctx context.Context) error {
	if err := cp.writeCredentials(); err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(cp.AdminConfig())
	if err != nil {
		return fmt.Errorf("building the admin HTTP client: %w", err)
	}
	cp.adminHTTP = httpClient
	if err := cp.startEtcd(ctx); err != nil {
		return err
	}
	if err := cp.startAPIServerOnFreePort(ctx); err != nil {
		return err
	}
	return cp.startComponents(ctx)
}

func (cp *ControlPlane) certDir() string { return filepath.Join(cp.workDir, "certs") }

// writeCredentials makes the CA, the apiserver's serving certificate, the service account key
// and the admin identity.
func (cp *ControlPlane) writeCredentials() error {
	if err := os.MkdirAll(cp.certDir(), 0o700); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	ca, err := NewCA("nodeguard-test-ca")
	if err != nil {
		return err
	}
	cp.ca = ca
	if err := os.WriteFile(filepath.Join(cp.certDir(), "ca.crt"), ca.CertPEM(), 0o644); err != nil {
		return fmt.Errorf("writing CA certificate: %w", err)
	}
	certPEM, keyPEM, err := ca.IssueServingCert("127.0.0.1", "localhost")
	if err != nil {
		return err
	}
	if _, _, err := WriteCertPair(cp.certDir(), "apiserver", certPEM, keyPEM); err != nil {
		return fmt.Errorf("apiserver serving certificate: %w", err)
	}
	// The apiserver derives the public half from a private key file, so one file serves both
	// --service-account-key-file and --service-account-signing-key-file.
	saKey, err := newKey()
	if err != nil {
		return err
	}
	saKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return fmt.Errorf("encoding service account key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cp.certDir(), "service-account.key"), saKeyPEM, 0o600); err != nil {
		return fmt.Errorf("writing service account key: %w", err)
	}
	// The apiserver's own identity towards the kubelets (logs, exec, and
	// /api/v1/nodes/NAME/proxy/...), which they authenticate against their
	// client CA and authorize through it, as kubeadm's
	// apiserver-kubelet-client.
	kubeletClientCert, kubeletClientKey, err := ca.IssueClientCert("kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	if _, _, err := WriteCertPair(cp.certDir(), "apiserver-kubelet-client", kubeletClientCert, kubeletClientKey); err != nil {
		return fmt.Errorf("apiserver's kubelet client certificate: %w", err)
	}
	cp.adminCert, cp.adminKey, err = ca.IssueClientCert("admin", "system:masters")
	return err
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	dataDir := filepath.Join(cp.workDir, "etcd-data")
	for attempt := 1; ; attempt++ {
		// A failed attempt may have initialised the data directory with its own peer URL.
		if err := os.RemoveAll(dataDir); err != nil {
			return fmt.Errorf("clearing etcd data directory: %w", err)
		}
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		args := []string{
			"--name=nodeguard",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=nodeguard=" + peerURL,
			// Throwaway data: durability only costs time here.
			"--unsafe-no-fsync",
		}
		p, err := startProcess("etcd", filepath.Join(cp.binDir, "etcd"), args, filepath.Join(cp.workDir, "etcd.log"))
		if err != nil {
			return err
		}
		cp.etcd = p
		err = cp.waitReady(ctx, p, func(ctx context.Context) error { return cp.probe(ctx, http.DefaultClient, clientURL+"/health") })
		if err == nil {
			cp.etcdURL = clientURL
			return nil
		}
		if retry := attempt < startAttempts && p.lostPortRace(); !retry {
			return fmt.Errorf("etcd did not become ready: %w\n--- last lines of %s ---\n%s", err, p.logPath, p.logTail(logTailLines))
		}
		if err := cp.stopEtcd(); err != nil {
			return err
		}
	}
}

func (cp *ControlPlane) startAPIServerOnFreePort(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		cp.apiserverPort = ports[0]
		p, err := cp.launchAPIServer(ctx)
		if err == nil || p == nil || attempt >= startAttempts || !p.lostPortRace() {
			return err
		}
		if err := cp.stopAPIServer(); err != nil {
			return err
		}
	}
}

// StartAPIServer starts the apiserver again after StopAPIServer, on the same port, etcd and
// certificates, and waits until it is ready: clients made before keep working.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	switch {
	case cp.stopped:
		return errors.New("the control plane has been stopped")
	case cp.apiserver != nil:
		return errors.New("the apiserver is already running")
	}
	if _, err := cp.launchAPIServer(ctx); err != nil {
		// Leave it stopped, so that a later StartAPIServer can try again.
		return errors.Join(err, cp.stopAPIServer())
	}
	return nil
}

// launchAPIServer starts the apiserver on cp.apiserverPort and waits for it. It returns the
// process even on failure, so the caller can look at its log; the process stays registered
// in cp, for Stop.
func (cp *ControlPlane) launchAPIServer(ctx context.Context) (*process, error) {
	p, err := startProcess("kube-apiserver", filepath.Join(cp.binDir, "kube-apiserver"), cp.apiserverArgs(), filepath.Join(cp.workDir, "kube-apiserver.log"))
	if err != nil {
		return nil, err
	}
	cp.apiserver = p
	err = cp.waitReady(ctx, p, func(ctx context.Context) error { return cp.probe(ctx, cp.adminHTTP, cp.URL()+"/readyz") })
	if err != nil {
		return p, fmt.Errorf("kube-apiserver did not become ready: %w\n--- last lines of %s ---\n%s", err, p.logPath, p.logTail(logTailLines))
	}
	return p, nil
}

func (cp *ControlPlane) apiserverArgs() []string {
	certs := cp.certDir()
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", cp.apiserverPort),
		"--cert-dir=" + certs,
		"--tls-cert-file=" + filepath.Join(certs, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(certs, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(certs, "ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(certs, "service-account.key"),
		"--service-account-signing-key-file=" + filepath.Join(certs, "service-account.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// The endpoints of the "kubernetes" Service may not be a loopback address; nothing
		// here needs that Service, so do not keep trying to write it.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		// Reaching the kubelets as a kubeadm cluster does: by the address a
		// kubelet reports (a name here resolves nowhere), with a client
		// certificate they accept.
		"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--kubelet-client-certificate=" + filepath.Join(certs, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + filepath.Join(certs, "apiserver-kubelet-client.key"),
	}
	if cp.opts.AuthorizationConfigFile != "" {
		args = append(args, "--authorization-config="+cp.opts.AuthorizationConfigFile)
	} else {
		args = append(args, "--authorization-mode=Node,RBAC")
	}
	if cp.opts.AdmissionControlConfigFile != "" {
		args = append(args, "--admission-control-config-file="+cp.opts.AdmissionControlConfigFile)
	}
	if len(cp.opts.EnableAdmissionPlugins) > 0 {
		args = append(args, "--enable-admission-plugins="+strings.Join(cp.opts.EnableAdmissionPlugins, ","))
	}
	// The apiserver refuses a plugin that is both enabled and disabled.
	if !slices.Contains(cp.opts.EnableAdmissionPlugins, "ServiceAccount") {
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	return append(args, cp.opts.ExtraAPIServerArgs...)
}

// waitReady polls ready until it succeeds, p exits, ctx ends or the ready timeout passes.
func (cp *ControlPlane) waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, cp.readyTimeout, true, func(ctx context.Context) (bool, error) {
		if exited, waitErr := p.hasExited(); exited {
			return false, fmt.Errorf("%s exited early: %v", p.name, waitErr)
		}
		lastErr = ready(ctx)
		return lastErr == nil, nil
	})
	if err != nil && lastErr != nil && wait.Interrupted(err) {
		return fmt.Errorf("%w (last probe: %v)", err, lastErr)
	}
	return err
}

func (cp *ControlPlane) probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// StopAPIServer stops the apiserver and leaves etcd running, to simulate an apiserver outage;
// StartAPIServer brings it back. A controller-manager and a scheduler keep running and
// reconnect.
func (cp *ControlPlane) StopAPIServer() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.stopAPIServer()
}

func (cp *ControlPlane) stopAPIServer() error {
	p := cp.apiserver
	cp.apiserver = nil
	if p == nil {
		return nil
	}
	return p.stop()
}

func (cp *ControlPlane) stopEtcd() error {
	p := cp.etcd
	cp.etcd = nil
	if p == nil {
		return nil
	}
	return p.stop()
}

// Stop stops the scheduler, the controller-manager, the apiserver and etcd, waits until all have
// exited, and removes the work directory if Start created it. It may be called more than once.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.stopped = true
	errs := []error{cp.stopComponents(), cp.stopAPIServer(), cp.stopEtcd()}
	if cp.ownsWorkDir {
		if err := os.RemoveAll(cp.workDir); err != nil {
			errs = append(errs, fmt.Errorf("removing work directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// URL is the apiserver's address, https://127.0.0.1:PORT; it survives StopAPIServer and
// StartAPIServer.
func (cp *ControlPlane) URL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", cp.apiserverPort)
}

// EtcdURL is etcd's client address.
func (cp *ControlPlane) EtcdURL() string { return cp.etcdURL }

// WorkDir holds the certificates and the logs etcd.log and kube-apiserver.log (and
// kube-controller-manager.log, kube-scheduler.log).
func (cp *ControlPlane) WorkDir() string { return cp.workDir }

// CA is the authority the apiserver trusts for client certificates; it also signed the
// apiserver's serving certificate.
func (cp *ControlPlane) CA() *CA { return cp.ca }

// LogTail returns the last lines of the etcd and apiserver logs (and the controller-manager's
// and the scheduler's, when they run), for a failing test to print.
func (cp *ControlPlane) LogTail(lines int) string {
	var b strings.Builder
	names := []string{"etcd.log", "kube-apiserver.log"}
	if cp.opts.ControllerManager {
		names = append(names, "kube-controller-manager.log")
	}
	if cp.opts.Scheduler {
		names = append(names, "kube-scheduler.log")
	}
	for _, name := range names {
		path := filepath.Join(cp.workDir, name)
		fmt.Fprintf(&b, "--- last lines of %s ---\n%s\n", path, tailFile(path, lines))
	}
	return b.String()
}
