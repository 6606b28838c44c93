package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodeguard/nodeguard/pkg/certs"
)

// Options are the command's flags.
type Options struct {
	OutDir string

	Namespace     string
	Service       string
	ClusterDomain string
	ExtraIPs      []string
	ExtraDNSNames []string

	ClientCommonName string

	CAValidity   time.Duration
	CertValidity time.Duration

	ReuseCA bool
	Force   bool
}

// NewOptions returns the defaults, which match manifests/base.
func NewOptions() *Options {
	return &Options{
		OutDir:           "manifests/overlays/static-certs/certs",
		Namespace:        "nodeguard",
		Service:          "nodeguard-webhook",
		ClusterDomain:    "cluster.local",
		ClientCommonName: "kube-apiserver",
		CAValidity:       10 * 365 * 24 * time.Hour,
		CertValidity:     365 * 24 * time.Hour,
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.OutDir, "out-dir", o.OutDir, "Directory for the certificates and keys (created with mode 0700). The default is where the static-certs overlay reads them from.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the webhook's Service.")
	fs.StringVar(&o.Service, "service", o.Service, "Name of the webhook's Service. The serving certificate names SERVICE, SERVICE.NAMESPACE, SERVICE.NAMESPACE.svc and SERVICE.NAMESPACE.svc.CLUSTER-DOMAIN.")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "The cluster's DNS domain.")
	fs.StringSliceVar(&o.ExtraIPs, "extra-ip", o.ExtraIPs, "More IP addresses for the serving certificate, e.g. the Service's pinned ClusterIP when kube-apiserver cannot resolve the Service's name (repeat or separate with commas).")
	fs.StringSliceVar(&o.ExtraDNSNames, "extra-dns", o.ExtraDNSNames, "More DNS names for the serving certificate (repeat or separate with commas).")
	fs.StringVar(&o.ClientCommonName, "client-common-name", o.ClientCommonName, "User name in the client certificate kube-apiserver presents to the webhook. The webhook checks only that it chains to the client CA.")
	fs.DurationVar(&o.CAValidity, "ca-validity", o.CAValidity, "How long the two CAs are valid. Replacing the serving CA means reinstalling it on every control-plane node, so make it long.")
	fs.DurationVar(&o.CertValidity, "cert-validity", o.CertValidity, "How long the serving and client certificates are valid. Renew them with --reuse-ca --force.")
	fs.BoolVar(&o.ReuseCA, "reuse-ca", o.ReuseCA, "Issue new serving and client certificates from the CAs already in --out-dir instead of making new CAs, so nothing changes on the control plane but the client certificate file. The CA files are read, never written.")
	fs.BoolVar(&o.Force, "force", o.Force, "Replace files that exist in --out-dir. Without it nothing is written if any file would be replaced.")
}

// Validate reports every problem with the options at once.
func (o *Options) Validate() []error {
	var errs []error
	if o.OutDir == "" {
		errs = append(errs, errors.New("--out-dir is required"))
	}
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1035Label(o.Service); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--service %q: %s", o.Service, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(o.ClusterDomain); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--cluster-domain %q: %s", o.ClusterDomain, strings.Join(msgs, "; ")))
	}
	for _, ip := range o.ExtraIPs {
		if net.ParseIP(ip) == nil {
			errs = append(errs, fmt.Errorf("--extra-ip %q: not an IP address", ip))
		}
	}
	for _, name := range o.ExtraDNSNames {
		// A leading "*." is a wildcard, which a certificate may carry.
		if msgs := validation.IsDNS1123Subdomain(strings.TrimPrefix(name, "*.")); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--extra-dns %q: %s", name, strings.Join(msgs, "; ")))
		}
	}
	if strings.TrimSpace(o.ClientCommonName) == "" {
		errs = append(errs, errors.New("--client-common-name must not be empty"))
	}
	if o.CAValidity <= 0 {
		errs = append(errs, fmt.Errorf("--ca-validity %v: must be positive", o.CAValidity))
	}
	if o.CertValidity <= 0 {
		errs = append(errs, fmt.Errorf("--cert-validity %v: must be positive", o.CertValidity))
	}
	if !o.ReuseCA && o.CAValidity > 0 && o.CertValidity > o.CAValidity {
		errs = append(errs, fmt.Errorf("--cert-validity %v is longer than --ca-validity %v: the certificates would stop verifying when their CA expires", o.CertValidity, o.CAValidity))
	}
	return errs
}

// Bundle turns validated options into what to write.
func (o *Options) Bundle() certs.Bundle {
	hosts := certs.ServiceHosts(o.Service, o.Namespace, o.ClusterDomain)
	hosts = append(hosts, o.ExtraDNSNames...)
	hosts = append(hosts, o.ExtraIPs...)
	return certs.Bundle{
		Dir:              o.OutDir,
		ServingHosts:     hosts,
		ClientCommonName: o.ClientCommonName,
		CAValidity:       o.CAValidity,
		CertValidity:     o.CertValidity,
		ReuseCAs:         o.ReuseCA,
		Overwrite:        o.Force,
	}
}
