package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantErrs []string
	}{
		{name: "defaults"},
		{name: "extra names", args: []string{"--extra-ip=10.96.0.40,fd00::40", "--extra-dns=webhook.example.com", "--extra-dns=*.example.org"}},
		{name: "reuse with a long certificate", args: []string{"--reuse-ca", "--cert-validity=200000h"}},
		{name: "no output directory", args: []string{"--out-dir="}, wantErrs: []string{"--out-dir is required"}},
		{name: "bad namespace", args: []string{"--namespace=Node_Guard"}, wantErrs: []string{"--namespace"}},
		{name: "bad service", args: []string{"--service=9webhook"}, wantErrs: []string{"--service"}},
		{name: "bad cluster domain", args: []string{"--cluster-domain=cluster..local"}, wantErrs: []string{"--cluster-domain"}},
		{name: "bad IP", args: []string{"--extra-ip=10.96.0.400"}, wantErrs: []string{`--extra-ip "10.96.0.400"`}},
		{name: "bad DNS name", args: []string{"--extra-dns=under_score.example"}, wantErrs: []string{"--extra-dns"}},
		{name: "blank client name", args: []string{"--client-common-name= "}, wantErrs: []string{"--client-common-name"}},
		{name: "zero validity", args: []string{"--ca-validity=0", "--cert-validity=-1h"}, wantErrs: []string{"--ca-validity", "--cert-validity"}},
		{name: "certificates outliving the CA", args: []string{"--ca-validity=24h", "--cert-validity=48h"}, wantErrs: []string{"longer than --ca-validity"}},
		{name: "every problem at once", args: []string{"--out-dir=", "--extra-ip=x", "--extra-ip=y"}, wantErrs: []string{"--out-dir", `"x"`, `"y"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			opts.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			errs := opts.Validate()
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("Validate() = %v, want %d errors matching %q", errs, len(tt.wantErrs), tt.wantErrs)
			}
			for i, want := range tt.wantErrs {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], want)
				}
			}
		})
	}
}

func TestBundle(t *testing.T) {
	opts := NewOptions()
	opts.OutDir, opts.ExtraIPs, opts.ExtraDNSNames, opts.ReuseCA, opts.Force = "out", []string{"10.96.0.40"}, []string{"webhook.example.com"}, true, true
	b := opts.Bundle()
	wantHosts := []string{
		"nodeguard-webhook", "nodeguard-webhook.nodeguard", "nodeguard-webhook.nodeguard.svc",
		"nodeguard-webhook.nodeguard.svc.cluster.local", "webhook.example.com", "10.96.0.40",
	}
	if !slices.Equal(b.ServingHosts, wantHosts) {
		t.Errorf("ServingHosts = %v, want %v", b.ServingHosts, wantHosts)
	}
	if b.Dir != "out" || !b.ReuseCAs || !b.Overwrite || b.ClientCommonName != "kube-apiserver" || b.CertValidity != 365*24*time.Hour {
		t.Errorf("Bundle() = %+v: flags not carried over", b)
	}
}
