package manifests

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/cert"
)

const (
	servingSecret  = "nodeguard-webhook-tls"
	clientCASecret = "nodeguard-apiserver-client-ca"
	injectCAFrom   = "cert-manager.io/inject-ca-from"
	// serviceHost is the name kube-apiserver calls admission webhooks by.
	serviceHost = webhookName + "." + namespace + ".svc"
)

// volumeSecret is the Secret behind one of the webhook's volumes.
func volumeSecret(o objects, volume string) (string, error) {
	deploy, _, err := webhookDeployment(o)
	if err != nil {
		return "", err
	}
	for _, v := range deploy.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.Secret != nil {
			return v.Secret.SecretName, nil
		}
	}
	return "", fmt.Errorf("the webhook has no Secret volume %s", volume)
}

func certificate(o objects, name string) (*unstructured.Unstructured, error) {
	obj, err := o.get("Certificate", name)
	if err != nil {
		return nil, err
	}
	if obj.GetNamespace() != namespace {
		return nil, fmt.Errorf("Certificate %s is in namespace %q", name, obj.GetNamespace())
	}
	return obj, nil
}

// issuerCA follows a Certificate's issuerRef to a CA Issuer and returns the
// CA Certificate whose Secret that Issuer signs with.
func issuerCA(o objects, crt *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	kind, _, _ := unstructured.NestedString(crt.Object, "spec", "issuerRef", "kind")
	name, _, _ := unstructured.NestedString(crt.Object, "spec", "issuerRef", "name")
	if kind != "Issuer" {
		return nil, fmt.Errorf("Certificate %s: issuerRef kind %q, want an Issuer in the namespace", crt.GetName(), kind)
	}
	issuer, err := o.get("Issuer", name)
	if err != nil {
		return nil, fmt.Errorf("Certificate %s: %w", crt.GetName(), err)
	}
	caSecret, _, _ := unstructured.NestedString(issuer.Object, "spec", "ca", "secretName")
	for _, candidate := range o.ofKind("Certificate") {
		isCA, _, _ := unstructured.NestedBool(candidate.Object, "spec", "isCA")
		secret, _, _ := unstructured.NestedString(candidate.Object, "spec", "secretName")
		if isCA && caSecret != "" && secret == caSecret {
			return candidate, nil
		}
	}
	return nil, fmt.Errorf("Certificate %s: Issuer %s is not a CA Issuer backed by a CA Certificate of this overlay", crt.GetName(), name)
}

// checkCertManager: the CA injected into the webhooks is the one that signs
// the serving certificate the pods mount, for the name the apiserver calls;
// the client CA the pods trust signs a client certificate.
func checkCertManager(o objects) error {
	cfg, err := webhookConfiguration(o)
	if err != nil {
		return err
	}
	ref := cfg.Annotations[injectCAFrom]
	refNamespace, refName, ok := strings.Cut(ref, "/")
	if !ok || refNamespace != namespace {
		return fmt.Errorf("ValidatingWebhookConfiguration annotation %s=%q: want %s/<Certificate>", injectCAFrom, ref, namespace)
	}
	serving, err := certificate(o, refName)
	if err != nil {
		return fmt.Errorf("%s: %w", injectCAFrom, err)
	}
	mounted, err := volumeSecret(o, "tls")
	if err != nil {
		return err
	}
	var errs []error
	if secret, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName"); secret != mounted {
		errs = append(errs, fmt.Errorf("Certificate %s writes Secret %q, but the webhook mounts %q", refName, secret, mounted))
	}
	if names, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames"); !slices.Contains(names, serviceHost) {
		errs = append(errs, fmt.Errorf("Certificate %s dnsNames %v lack %s", refName, names, serviceHost))
	}
	if usages, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "usages"); !slices.Contains(usages, "server auth") {
		errs = append(errs, fmt.Errorf("Certificate %s usages %v lack server auth", refName, usages))
	}
	if _, err := issuerCA(o, serving); err != nil {
		errs = append(errs, err)
	}

	clientCA, err := volumeSecret(o, "client-ca")
	if err != nil {
		return err
	}
	found := false
	for _, crt := range o.ofKind("Certificate") {
		usages, _, _ := unstructured.NestedStringSlice(crt.Object, "spec", "usages")
		if !slices.Contains(usages, "client auth") {
			continue
		}
		ca, err := issuerCA(o, crt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		secret, _, _ := unstructured.NestedString(ca.Object, "spec", "secretName")
		found = found || secret == clientCA
	}
	if !found {
		errs = append(errs, fmt.Errorf("no client certificate is issued by the CA in Secret %s, which the webhook trusts", clientCA))
	}
	return errors.Join(errs...)
}

func secretData(o objects, name string) (*corev1.Secret, error) {
	return typed[corev1.Secret](o, "Secret", name)
}

// checkStaticCerts: every webhook's caBundle verifies the serving
// certificate the pods mount, for the name the apiserver calls.
func checkStaticCerts(o objects) error {
	serving, err := secretData(o, servingSecret)
	if err != nil {
		return err
	}
	if _, err := tls.X509KeyPair(serving.Data["tls.crt"], serving.Data["tls.key"]); err != nil {
		return fmt.Errorf("Secret %s: tls.crt and tls.key: %w", servingSecret, err)
	}
	leaves, err := cert.ParseCertsPEM(serving.Data["tls.crt"])
	if err != nil {
		return fmt.Errorf("Secret %s tls.crt: %w", servingSecret, err)
	}
	return eachWebhookCABundle(o, func(pool *x509.CertPool) error {
		_, err := leaves[0].Verify(x509.VerifyOptions{DNSName: serviceHost, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	})
}

func eachWebhookCABundle(o objects, check func(*x509.CertPool) error) error {
	cfg, err := webhookConfiguration(o)
	if err != nil {
		return err
	}
	var errs []error
	for _, hook := range cfg.Webhooks {
		pool := x509.NewCertPool()
		if len(hook.ClientConfig.CABundle) == 0 || !pool.AppendCertsFromPEM(hook.ClientConfig.CABundle) {
			errs = append(errs, fmt.Errorf("webhook %s: no CA in caBundle", hook.Name))
			continue
		}
		if err := check(pool); err != nil {
			errs = append(errs, fmt.Errorf("webhook %s: caBundle does not verify the serving certificate: %w", hook.Name, err))
		}
	}
	return errors.Join(errs...)
}

// checkClientCASecret: the webhook's client CA Secret holds the CA's
// certificate and nothing else.
func checkClientCASecret(o objects) error {
	secret, err := secretData(o, clientCASecret)
	if err != nil {
		return err
	}
	if len(secret.Data) != 1 {
		return fmt.Errorf("Secret %s holds %d keys, want only ca.crt", clientCASecret, len(secret.Data))
	}
	certs, err := cert.ParseCertsPEM(secret.Data["ca.crt"])
	if err != nil {
		return fmt.Errorf("Secret %s ca.crt: %w", clientCASecret, err)
	}
	for _, c := range certs {
		if !c.IsCA {
			return fmt.Errorf("Secret %s ca.crt: %q is not a CA", clientCASecret, c.Subject.CommonName)
		}
	}
	return nil
}

// checkNoCAKeys: the only private key shipped into the cluster is the
// serving certificate's; a CA key there would let anyone who can read the
// Secret mint certificates the apiserver or the webhook trusts.
func checkNoCAKeys(o objects) error {
	var errs []error
	for _, obj := range o.ofKind("Secret") {
		secret, err := secretData(o, obj.GetName())
		if err != nil {
			return err
		}
		for key, value := range secret.Data {
			if !holdsPrivateKey(value) {
				continue
			}
			if secret.Type != corev1.SecretTypeTLS || key != corev1.TLSPrivateKeyKey {
				errs = append(errs, fmt.Errorf("Secret %s key %s holds a private key", secret.Name, key))
				continue
			}
			leaves, err := cert.ParseCertsPEM(secret.Data[corev1.TLSCertKey])
			if err != nil || leaves[0].IsCA {
				errs = append(errs, fmt.Errorf("Secret %s: tls.key belongs to a CA (or tls.crt is unreadable: %v)", secret.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func holdsPrivateKey(data []byte) bool {
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return bytes.Contains(data, []byte("PRIVATE KEY"))
		}
		if strings.Contains(block.Type, "PRIVATE KEY") {
			return true
		}
	}
}
