package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// NodeMonitorGracePeriod is kube-controller-manager's --node-monitor-grace-period here: how long
// a Node whose kubelet stopped renewing its Lease stays Ready before the node lifecycle
// controller marks it Unknown. It is twice the kubelet's default renewal interval (10 s, a
// quarter of its nodeLeaseDurationSeconds), so one late renewal on a busy machine does not flip
// a healthy Node, and short enough that tests need not wait upstream's 50 s. Nothing checks the
// two against each other: a test that shortens the kubelet's lease may shorten this too, through
// ExtraControllerManagerArgs.
const NodeMonitorGracePeriod = 20 * time.Second

// nodeMonitorPeriod is how often the node lifecycle controller looks at the Nodes; below
// upstream's 5 s so that the grace period, not the polling, is what a test waits for. Looking at
// a handful of Nodes in the informer's cache costs nothing.
const nodeMonitorPeriod = time.Second

// Identities of the two components, as kubeadm gives them: the apiserver's bootstrap RBAC binds
// the ClusterRoles of the same names to these users, and in kube-system binds them to the Role
// that reads extension-apiserver-authentication, which delegated authentication needs.
const (
	controllerManagerUser = "system:kube-controller-manager"
	schedulerUser         = "system:kube-scheduler"
)

// componentFiles are what a component authenticates with, to the apiserver and to its clients.
type componentFiles struct {
	kubeconfig string
	certFile   string
	keyFile    string
}

// writeComponentFiles issues user a client certificate, writes a kubeconfig holding it, and
// issues a serving certificate for loopback, so the component's /healthz can be checked over
// verified HTTPS.
func (cp *ControlPlane) writeComponentFiles(name, user string) (componentFiles, error) {
	certPEM, keyPEM, err := cp.ca.IssueClientCert(user)
	if err != nil {
		return componentFiles{}, fmt.Errorf("%s client certificate: %w", name, err)
	}
	files := componentFiles{kubeconfig: filepath.Join(cp.certDir(), name+".kubeconfig")}
	if err := WriteKubeconfig(files.kubeconfig, cp.configFor(certPEM, keyPEM)); err != nil {
		return componentFiles{}, fmt.Errorf("%s: %w", name, err)
	}
	certPEM, keyPEM, err = cp.ca.IssueServingCert("127.0.0.1", "localhost")
	if err != nil {
		return componentFiles{}, fmt.Errorf("%s serving certificate: %w", name, err)
	}
	if files.certFile, files.keyFile, err = WriteCertPair(cp.certDir(), name+"-serving", certPEM, keyPEM); err != nil {
		return componentFiles{}, fmt.Errorf("%s serving certificate: %w", name, err)
	}
	return files, nil
}

// servingArgs are the flags both components share: HTTPS on loopback with our certificate, and
// delegated authentication and authorization through the apiserver, so that an admin client
// certificate can read /metrics; /healthz, /readyz and /livez need no authorization.
//
// The client CA is given as a file, and not looked up in the apiserver's
// extension-apiserver-authentication ConfigMap: the components serve before that lookup is done,
// and a client certificate presented in between counts as anonymous. Our apiserver has no
// request-header CA to look up either.
func (cp *ControlPlane) servingArgs(files componentFiles, port int) []string {
	return []string{
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + files.certFile,
		"--tls-private-key-file=" + files.keyFile,
		"--client-ca-file=" + filepath.Join(cp.certDir(), "ca.crt"),
		"--authentication-skip-lookup=true",
		"--authentication-kubeconfig=" + files.kubeconfig,
		"--authorization-kubeconfig=" + files.kubeconfig,
	}
}

// controllerManagerArgs is kube-controller-manager's command line. Every controller runs at its
// defaults except where a flag here says otherwise.
//
// Leader election is off, for it and the scheduler alike: there is only one of each, and with it
// on a component that cannot renew its Lease for the renew deadline (10 s) exits, as it should
// in a real cluster where the kubelet restarts it; here nothing would, and StopAPIServer would
// take both down for good.
//
// Taint-based eviction stays on: a Node that goes Unknown gets the unreachable NoExecute taint,
// and its pods are evicted only after their tolerations run out, 300 s for pods that the
// DefaultTolerationSeconds admission plugin (on by default) gave the usual ones, longer than any
// test keeps a kubelet down. DaemonSet pods tolerate it for ever.
func (cp *ControlPlane) controllerManagerArgs(files componentFiles, port int) []string {
	certs := cp.certDir()
	args := append(cp.servingArgs(files, port),
		"--kubeconfig="+files.kubeconfig,
		"--leader-elect=false",
		// Each controller acts as its own service account (system:serviceaccount:kube-system:
		// deployment-controller and so on), with the RBAC upstream gives it, as on a real
		// cluster, rather than with the controller-manager's wider identity.
		"--use-service-account-credentials=true",
		// The apiserver's signing key: tokens the controller-manager signs (legacy
		// service-account token Secrets) verify against its --service-account-key-file.
		"--service-account-private-key-file="+filepath.Join(certs, "service-account.key"),
		"--root-ca-file="+filepath.Join(certs, "ca.crt"),
		// The CA the apiserver trusts for client certificates signs approved CSRs, kubelets'
		// included. Nothing here asks for one today (the framework issues node certificates
		// directly from the same CA, and its kubelets do not rotate them), so this changes
		// nothing for them.
		"--cluster-signing-cert-file="+filepath.Join(certs, "ca.crt"),
		"--cluster-signing-key-file="+filepath.Join(certs, "ca.key"),
		"--node-monitor-grace-period="+NodeMonitorGracePeriod.String(),
		"--node-monitor-period="+nodeMonitorPeriod.String(),
		// The default, said explicitly: the node IPAM controller would need --cluster-cidr and
		// hands out pod CIDRs nothing here uses.
		"--allocate-node-cidrs=false",
	)
	return append(args, cp.opts.ExtraControllerManagerArgs...)
}

// writeSchedulerConfig writes the KubeSchedulerConfiguration the scheduler runs: the default
// profile, our kubeconfig, no leader election (see controllerManagerArgs). The client connection
// is set here because --kubeconfig and --leader-elect are deprecated when a config is given.
func (cp *ControlPlane) writeSchedulerConfig(files componentFiles) (string, error) {
	config := map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{"kubeconfig": files.kubeconfig},
		"leaderElection":   map[string]any{"leaderElect": false},
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("encoding the scheduler configuration: %w", err)
	}
	path := filepath.Join(cp.workDir, "kube-scheduler.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("writing the scheduler configuration: %w", err)
	}
	return path, nil
}

// startComponents starts the controller-manager and the scheduler that opts ask for, once the
// apiserver is ready, and waits until each answers /healthz.
func (cp *ControlPlane) startComponents(ctx context.Context) error {
	if cp.opts.ControllerManager {
		files, err := cp.writeComponentFiles("kube-controller-manager", controllerManagerUser)
		if err != nil {
			return err
		}
		keyPEM, err := cp.ca.ca.KeyPEM()
		if err != nil {
			return fmt.Errorf("encoding the CA key for the controller-manager: %w", err)
		}
		if err := os.WriteFile(filepath.Join(cp.certDir(), "ca.key"), keyPEM, 0o600); err != nil {
			return fmt.Errorf("writing the CA key for the controller-manager: %w", err)
		}
		p, port, err := cp.startComponent(ctx, "kube-controller-manager", func(port int) []string {
			return cp.controllerManagerArgs(files, port)
		})
		cp.controllerManager, cp.controllerManagerPort = p, port
		if err != nil {
			return err
		}
	}
	if cp.opts.Scheduler {
		files, err := cp.writeComponentFiles("kube-scheduler", schedulerUser)
		if err != nil {
			return err
		}
		config, err := cp.writeSchedulerConfig(files)
		if err != nil {
			return err
		}
		p, port, err := cp.startComponent(ctx, "kube-scheduler", func(port int) []string {
			args := append([]string{"--config=" + config}, cp.servingArgs(files, port)...)
			return append(args, cp.opts.ExtraSchedulerArgs...)
		})
		cp.scheduler, cp.schedulerPort = p, port
		if err != nil {
			return err
		}
	}
	return nil
}

// startComponent runs the binary name on a free port until /healthz answers, trying other ports
// when one turns out to be taken. It returns the last process it started, running or not, for
// Stop.
func (cp *ControlPlane) startComponent(ctx context.Context, name string, args func(port int) []string) (*process, int, error) {
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, 0, err
		}
		p, err := startProcess(name, filepath.Join(cp.binDir, name), args(ports[0]), filepath.Join(cp.workDir, name+".log"))
		if err != nil {
			return nil, 0, err
		}
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
		err = cp.waitReady(ctx, p, func(ctx context.Context) error { return cp.probe(ctx, cp.adminHTTP, url) })
		if err == nil {
			return p, ports[0], nil
		}
		if attempt >= startAttempts || !p.lostPortRace() {
			return p, ports[0], fmt.Errorf("%s did not become healthy: %w\n--- last lines of %s ---\n%s", name, err, p.logPath, p.logTail(logTailLines))
		}
		if err := p.stop(); err != nil {
			return nil, 0, err
		}
	}
}

// stopComponents stops the scheduler and the controller-manager, before the apiserver goes, so
// they do not spend their last seconds logging lost connections.
func (cp *ControlPlane) stopComponents() error {
	var errs []error
	for _, p := range []**process{&cp.scheduler, &cp.controllerManager} {
		if *p != nil {
			errs = append(errs, (*p).stop())
			*p = nil
		}
	}
	return errors.Join(errs...)
}

// ControllerManagerURL is kube-controller-manager's HTTPS address, https://127.0.0.1:PORT, or
// empty when Options.ControllerManager was not set. Its certificate is signed by CA(), and
// AdminConfig's client certificate may read its /metrics.
func (cp *ControlPlane) ControllerManagerURL() string {
	if cp.controllerManagerPort == 0 {
		return ""
	}
	return fmt.Sprintf("https://127.0.0.1:%d", cp.controllerManagerPort)
}

// SchedulerURL is kube-scheduler's HTTPS address, as ControllerManagerURL is the
// controller-manager's; empty when Options.Scheduler was not set.
func (cp *ControlPlane) SchedulerURL() string {
	if cp.schedulerPort == 0 {
		return ""
	}
	return fmt.Sprintf("https://127.0.0.1:%d", cp.schedulerPort)
}
