package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/effective"
)

// DefaultServerURL is where a kubelet serves its HTTPS API by default (its
// --port, 10250), reached from the node itself.
const DefaultServerURL = "https://127.0.0.1:10250"

// RunningReader reads what the kubelet runs: its /configz (the
// configuration it runs: defaults, --config, drop-ins and flags merged), its
// /flagz (its command line), and the configuration files it merges, as far
// as the agent can read them, to say what set a value. It presents the
// kubelet's own credentials, so the kubelet authenticates the request as its
// node and asks the apiserver whether system:node:NAME may get nodes/configz
// of NAME: nodeguard's authorizer allows exactly that (docs/security.md).
type RunningReader struct {
	// ServerURL is the kubelet's server, https://HOST:PORT (or http:// for
	// a stand-in without TLS, which is given no credentials).
	ServerURL string
	// CAFile verifies the kubelet's serving certificate; empty, it is not
	// verified (as kube-apiserver without --kubelet-certificate-authority).
	CAFile string
	// Credentials returns the REST config of the kubelet's kubeconfig,
	// read anew for each Read so that a rotated certificate is used.
	Credentials func() (*rest.Config, error)
	// Timeout bounds each request.
	Timeout time.Duration
	// Mode and ConfigFile are the agent's: the file it writes, and whether
	// that is the kubelet's --config or a drop-in of its --config-dir.
	Mode       Mode
	ConfigFile string
}

// Validate checks the reader's settings.
func (r *RunningReader) Validate() error {
	u, err := url.Parse(r.ServerURL)
	switch {
	case err != nil:
		return fmt.Errorf("kubelet server URL %q: %w", r.ServerURL, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return fmt.Errorf("kubelet server URL %q: want https://HOST:PORT", r.ServerURL)
	case u.Path != "" && u.Path != "/":
		return fmt.Errorf("kubelet server URL %q: want no path (the agent reads /configz and /flagz below it)", r.ServerURL)
	case r.Credentials == nil || r.Timeout <= 0 || r.ConfigFile == "":
		return errors.New("kubelet server: credentials, a timeout and the agent's file are needed")
	}
	return nil
}

// maxAnswer bounds what is read of an answer.
const maxAnswer = 2 * kubeletconfig.MaxConfigBytes

// Read reads the kubelet's running configuration. An error says, in words
// an operator can act on, why /configz could not be read; /flagz and the
// files only add detail, and their absence is no error.
func (r *RunningReader) Read(ctx context.Context) (effective.Observed, error) {
	client, err := r.client()
	if err != nil {
		return effective.Observed{}, err
	}
	defer client.CloseIdleConnections()
	body, err := r.get(ctx, client, "/configz", "application/json")
	if err != nil {
		return effective.Observed{}, err
	}
	config, err := effective.ParseConfigz(body)
	if err != nil {
		return effective.Observed{}, fmt.Errorf("the kubelet's running configuration (%s/configz): %w", r.ServerURL, err)
	}
	obs := effective.Observed{Config: config}
	if body, err := r.get(ctx, client, "/flagz", effective.FlagzAccept); err != nil {
		klog.FromContext(ctx).V(2).Info("The kubelet's /flagz is not readable; its flags are not known", "err", err)
	} else if obs.Flags, err = effective.ParseFlagz(body); err != nil {
		klog.FromContext(ctx).V(2).Info("The kubelet's /flagz does not parse; its flags are not known", "err", err)
	}
	r.files(ctx, &obs)
	return obs, nil
}

func (r *RunningReader) client() (*http.Client, error) {
	if strings.HasPrefix(r.ServerURL, "http://") {
		return &http.Client{Timeout: r.Timeout, Transport: &http.Transport{Proxy: nil}}, nil
	}
	creds, err := r.Credentials()
	if err != nil {
		return nil, fmt.Errorf("reading the kubelet's running configuration needs the kubelet's credentials: %w", err)
	}
	cfg := rest.AnonymousClientConfig(creds)
	// The kubelet's own credentials, to the kubelet: its client
	// certificate (or token), not the apiserver's CA or name.
	cfg.CertFile, cfg.KeyFile, cfg.CertData, cfg.KeyData = creds.CertFile, creds.KeyFile, creds.CertData, creds.KeyData
	cfg.BearerToken, cfg.BearerTokenFile = creds.BearerToken, creds.BearerTokenFile
	cfg.Host, cfg.APIPath = r.ServerURL, ""
	cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.ServerName = r.CAFile, nil, ""
	cfg.TLSClientConfig.Insecure = r.CAFile == ""
	cfg.Timeout = r.Timeout
	// The kubelet is on this node: never through a proxy.
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for the kubelet at %s: %w", r.ServerURL, err)
	}
	return client, nil
}

// get fetches one of the kubelet's paths, turning a refusal into words.
func (r *RunningReader) get(ctx context.Context, client *http.Client, path, accept string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	where := strings.TrimSuffix(r.ServerURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the kubelet does not answer at %s: %w", where, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", where, err)
	}
	said := strings.TrimSpace(string(body))
	if len(said) > 256 {
		said = said[:256] + "..."
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("the kubelet refused the node's credentials at %s (%s: %s): its authentication must accept the node's client certificate (authentication.x509.clientCAFile)", where, resp.Status, said)
	case http.StatusForbidden:
		return nil, fmt.Errorf("the kubelet's authorizer refused the node %s (%s: %s): a node may get its own nodes/configz only through nodeguard's authorization webhook (docs/install.md)", where, resp.Status, said)
	case http.StatusNotFound:
		return nil, fmt.Errorf("the kubelet does not serve %s (%s): enableDebuggingHandlers is false, or it is too old", where, resp.Status)
	}
	return nil, fmt.Errorf("%s: %s: %s", where, resp.Status, said)
}

// files fills in the kubelet's configuration files in the order it merges
// them, from its flags when /flagz showed them, else from what the agent
// knows of its own file.
func (r *RunningReader) files(ctx context.Context, obs *effective.Observed) {
	logger := klog.FromContext(ctx)
	own := filepath.Clean(r.ConfigFile)
	config, configDir := "", ""
	if obs.Flags != nil {
		config, configDir = obs.Flags["config"], obs.Flags["config-dir"]
	}
	switch r.Mode {
	case ModeDropIn:
		if obs.Flags != nil && configDir == "" {
			obs.NotReadingOwn = fmt.Sprintf("the kubelet runs without --config-dir, so it never reads the agent's drop-in %s", own)
			return
		}
		if configDir == "" {
			configDir = filepath.Dir(own)
		}
		if filepath.IsAbs(configDir) && !strings.HasPrefix(own, filepath.Clean(configDir)+string(filepath.Separator)) {
			obs.NotReadingOwn = fmt.Sprintf("the kubelet's --config-dir is %s, so it never reads the agent's drop-in %s", configDir, own)
			return
		}
		if config != "" {
			obs.Files = append(obs.Files, configFile(config, false, false))
		}
	default:
		if obs.Flags != nil && config == "" {
			obs.NotReadingOwn = fmt.Sprintf("the kubelet runs without --config, so it never reads the agent's file %s", own)
			return
		}
		if filepath.IsAbs(config) && filepath.Clean(config) != own {
			obs.NotReadingOwn = fmt.Sprintf("the kubelet runs --config=%s, not the agent's file %s", config, own)
			return
		}
		obs.Files = append(obs.Files, configFile(own, true, false))
	}
	if configDir == "" {
		return
	}
	dropIns, err := DropIns(configDir)
	if err != nil {
		logger.V(2).Info("The kubelet's drop-in directory is not readable here; what its drop-ins set is not known", "dir", configDir, "err", err)
	}
	if r.Mode == ModeDropIn && !slices.Contains(dropIns, own) {
		// The agent's drop-in, not written yet (or removed): where the
		// kubelet would merge it once it is.
		at, _ := slices.BinarySearchFunc(dropIns, own, compareWalkOrder)
		dropIns = slices.Insert(dropIns, at, own)
	}
	for _, path := range dropIns {
		obs.Files = append(obs.Files, configFile(path, filepath.Clean(path) == own, true))
	}
}

// compareWalkOrder orders paths as filepath.WalkDir visits them: by their
// components, each in lexical order.
func compareWalkOrder(a, b string) int {
	return slices.Compare(strings.Split(a, string(filepath.Separator)), strings.Split(b, string(filepath.Separator)))
}

func configFile(path string, own, dropIn bool) effective.File {
	// A file that cannot be read sets nothing the agent knows of; the
	// kubelet reads it or refuses to start.
	data, _ := os.ReadFile(path)
	return effective.File{Path: path, Data: data, Own: own, DropIn: dropIn}
}

// DropIns lists the drop-ins the kubelet merges from dir, in its order:
// the files ending in .conf, subdirectories included, in lexical order
// (cmd/kubelet/app/server.go, mergeKubeletConfigurations).
func DropIns(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !entry.IsDir() && filepath.Ext(entry.Name()) == dropInExtension {
			out = append(out, filepath.Clean(path))
		}
		return nil
	})
	return out, err
}

// dropInExtension is the only extension the kubelet reads in --config-dir.
const dropInExtension = ".conf"
