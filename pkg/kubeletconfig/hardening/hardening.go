package hardening

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Finding is one field a configuration sets that a rule refuses (or warns
// about), and why.
type Finding struct {
	// Field is the field's JSON path, e.g. authentication.anonymous.enabled.
	Field string `json:"-"`
	// CIS names the CIS Kubernetes Benchmark recommendation, "" for none.
	CIS string `json:"cis"`
	Why string `json:"why"`
}

// String is the finding as a sentence: "sets FIELD: WHY (CIS ...)".
func (f Finding) String() string {
	s := "sets " + f.Field + ": " + f.Why
	if f.CIS != "" {
		s += " (CIS Kubernetes Benchmark " + f.CIS + ")"
	}
	return s
}

// DefaultRuntimeEndpoints are the container runtime sockets a shared
// configuration may name without a list of its own: containerd's and
// CRI-O's well-known ones.
var DefaultRuntimeEndpoints = []string{
	"unix:///run/containerd/containerd.sock",
	"unix:///var/run/containerd/containerd.sock",
	"unix:///run/crio/crio.sock",
	"unix:///var/run/crio/crio.sock",
}

// Options shape Find.
type Options struct {
	// RuntimeEndpoints, when not nil, are the sockets
	// containerRuntimeEndpoint and imageServiceEndpoint may name; nil
	// leaves those two fields unjudged (the webhook judges them in Rego,
	// against its policy data).
	RuntimeEndpoints []string
}

// strongCiphers are ECDHE key exchange with AEAD ciphers, and the TLS 1.3
// suites (CIS 4.2.12), as the webhook itself serves.
var strongCiphers = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"TLS_AES_128_GCM_SHA256",
	"TLS_AES_256_GCM_SHA384",
	"TLS_CHACHA20_POLY1305_SHA256",
}

func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }

// pathField is a field naming a file or directory on the node that the
// kubelet executes, or loads and acts on. A shared configuration that
// points it at a directory a pod can write (a hostPath, a container's
// log directory) hands that pod the kubelet's root: so it is refused
// whenever it changes, like staticPodPath.
type pathField struct {
	name string
	get  func(*kubeletconfigv1beta1.KubeletConfiguration) string
	why  string
}

var pathFields = []pathField{
	{"staticPodPath", func(c *kubeletconfigv1beta1.KubeletConfiguration) string { return c.StaticPodPath },
		"a static pod directory decides which pods the kubelet runs outside admission control"},
	{"volumePluginDir", func(c *kubeletconfigv1beta1.KubeletConfiguration) string { return c.VolumePluginDir },
		"the kubelet runs the FlexVolume drivers it finds there as root"},
	{"tlsCertFile", func(c *kubeletconfigv1beta1.KubeletConfiguration) string { return c.TLSCertFile },
		"the kubelet would serve its API with whatever certificate that file holds"},
	{"tlsPrivateKeyFile", func(c *kubeletconfigv1beta1.KubeletConfiguration) string { return c.TLSPrivateKeyFile },
		"the kubelet would serve its API with whatever key that file holds"},
	{"resolvConf", func(c *kubeletconfigv1beta1.KubeletConfiguration) string {
		if c.ResolverConfig == nil {
			return ""
		}
		return *c.ResolverConfig
	}, "the kubelet hands that file's resolvers and search domains to every pod that uses the node's DNS"},
	{"podLogsDir", func(c *kubeletconfigv1beta1.KubeletConfiguration) string { return c.PodLogsDir },
		"the kubelet reads, rotates and serves the files (and follows the links) it finds there as root"},
}

// Find lists the fields cfg sets that the rules refuse, sorted by field.
// old is the configuration cfg replaces, nil for a new one: the path fields
// are refused when they differ from it.
func Find(cfg, old *kubeletconfigv1beta1.KubeletConfiguration, opts Options) []Finding {
	if cfg == nil {
		return nil
	}
	if old == nil {
		old = &kubeletconfigv1beta1.KubeletConfiguration{}
	}
	var found []Finding
	add := func(field, cis, why string) { found = append(found, Finding{Field: field, CIS: cis, Why: why}) }
	if isTrue(cfg.Authentication.Anonymous.Enabled) {
		add("authentication.anonymous.enabled", "4.2.1", "requests without credentials would reach the kubelet API")
	}
	if cfg.Authorization.Mode == kubeletconfigv1beta1.KubeletAuthorizationModeAlwaysAllow {
		add("authorization.mode", "4.2.2", "AlwaysAllow lets any caller that reaches the kubelet exec into every pod on the node")
	}
	// The client CA is the node's, provisioned with it: a shared
	// configuration that names another file hands the kubelet's API to
	// whoever holds that CA's keys.
	if cfg.Authentication.X509.ClientCAFile != "" {
		add("authentication.x509.clientCAFile", "4.2.3", "it changes which CA's client certificates the kubelet accepts; the node's own CA file must stand")
	}
	if isFalse(cfg.Authentication.Webhook.Enabled) {
		add("authentication.webhook.enabled", "4.2.3", "the kubelet would stop checking bearer tokens with the apiserver, leaving its API to client certificates alone")
	}
	if cfg.ReadOnlyPort != 0 {
		add("readOnlyPort", "4.2.4", "the read-only port serves pod specs and metrics without authentication")
	}
	if isFalse(cfg.MakeIPTablesUtilChains) {
		add("makeIPTablesUtilChains", "4.2.6", "the kubelet would stop keeping the iptables chains the node's networking relies on")
	}
	if v, ok := cfg.FeatureGates["RotateKubeletServerCertificate"]; ok && !v {
		add("featureGates.RotateKubeletServerCertificate", "4.2.11", "the kubelet would keep serving with a certificate it never renews")
	}
	var weak []string
	for _, s := range cfg.TLSCipherSuites {
		if !slices.Contains(strongCiphers, s) {
			weak = append(weak, s)
		}
	}
	if len(weak) > 0 {
		sort.Strings(weak)
		add("tlsCipherSuites", "4.2.12", fmt.Sprintf("weak cipher suites %s; only ECDHE with AES-GCM or ChaCha20-Poly1305 (and TLS 1.3 suites) are accepted", strings.Join(weak, ", ")))
	}
	if cfg.TLSMinVersion == "VersionTLS10" || cfg.TLSMinVersion == "VersionTLS11" {
		add("tlsMinVersion", "4.2.12", "TLS 1.0 and 1.1 are deprecated (RFC 8996); the minimum must be TLS 1.2 or above")
	}
	// 0 and -1 both mean no limit.
	if cfg.PodPidsLimit != nil && *cfg.PodPidsLimit <= 0 {
		add("podPidsLimit", "4.2.13", "pods would have no limit on process IDs, so one pod can exhaust the node's")
	}
	if opts.RuntimeEndpoints != nil {
		known := strings.Join(sortedCopy(opts.RuntimeEndpoints), ", ")
		if e := cfg.ContainerRuntimeEndpoint; e != "" && !slices.Contains(opts.RuntimeEndpoints, e) {
			add("containerRuntimeEndpoint", "", fmt.Sprintf("the kubelet would hand every container to %q, which is not one of the known runtime sockets (%s)", e, known))
		}
		if e := cfg.ImageServiceEndpoint; e != "" && !slices.Contains(opts.RuntimeEndpoints, e) {
			add("imageServiceEndpoint", "", fmt.Sprintf("the kubelet would pull images through %q, which is not one of the known runtime sockets (%s)", e, known))
		}
	}
	// Handlers the node may have turned off: in drop-in mode, and for the
	// agent's node-local fields, a field the ConfigMap leaves out keeps
	// the node's value, so setting one to true turns it on over the
	// node's choice.
	if isTrue(cfg.EnableDebuggingHandlers) {
		add("enableDebuggingHandlers", "", "it turns on exec, attach, port-forward and log endpoints the node may have turned off; leave it out to keep the node's own setting")
	}
	if isTrue(cfg.EnableProfilingHandler) {
		add("enableProfilingHandler", "", "it serves /debug/pprof, which reveals the kubelet's memory and goroutines; leave it out to keep the node's own setting")
	}
	if cfg.EnableContentionProfiling {
		add("enableContentionProfiling", "", "contention profiling slows the kubelet and exposes its lock profile through /debug/pprof")
	}
	// A wildcard lets pods set any sysctl under it, present and future
	// ones; named sysctls are only warned about (Risky).
	if wild := wildcardSysctls(cfg); len(wild) > 0 {
		add("allowedUnsafeSysctls", "", fmt.Sprintf("wildcards %s let pods set any sysctl under them, including ones that reach the node", strings.Join(wild, ", ")))
	}
	for _, p := range pathFields {
		if value := p.get(cfg); value != p.get(old) {
			add(p.name, "", p.why)
		}
	}
	if cfg.StaticPodURL != "" {
		add("staticPodURL", "", "the kubelet would run whatever pods that URL serves, outside admission control")
	}
	slices.SortFunc(found, func(a, b Finding) int { return strings.Compare(a.Field, b.Field) })
	return found
}

// Risky lists the fields cfg sets that deserve a warning, not a refusal.
func Risky(cfg *kubeletconfigv1beta1.KubeletConfiguration) []Finding {
	if cfg == nil {
		return nil
	}
	var risky []Finding
	if isFalse(cfg.FailSwapOn) {
		risky = append(risky, Finding{Field: "failSwapOn", Why: "the kubelet would run with swap on, which changes how memory limits and eviction behave"})
	}
	if len(cfg.AllowedUnsafeSysctls) > 0 && len(wildcardSysctls(cfg)) == 0 {
		risky = append(risky, Finding{Field: "allowedUnsafeSysctls", Why: "pods could set sysctls that are not isolated per pod"})
	}
	if cfg.EventRecordQPS != nil && *cfg.EventRecordQPS == 0 {
		risky = append(risky, Finding{Field: "eventRecordQPS", Why: "0 removes the limit on the events the kubelet creates (CIS 4.2.8)"})
	}
	return risky
}

func wildcardSysctls(cfg *kubeletconfigv1beta1.KubeletConfiguration) []string {
	var wild []string
	for _, s := range cfg.AllowedUnsafeSysctls {
		if strings.HasSuffix(s, "*") {
			wild = append(wild, s)
		}
	}
	sort.Strings(wild)
	return slices.Compact(wild)
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}
