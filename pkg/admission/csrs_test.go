package admission

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// csrPEM is a PEM certificate request for cn.
func csrPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestAdmitCSR(t *testing.T) {
	csr := func(op admissionv1.Operation, signer string, request []byte, want string) write {
		obj := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr"},
			Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Request: request}}
		w := write{user: nodeN1, op: op, group: "certificates.k8s.io", res: "certificatesigningrequests", wantRefusal: want, wantRuleName: RuleNodeCSRs}
		if op == admissionv1.Create {
			w.object = obj
		} else {
			w.name, w.object, w.old = "csr", obj, obj
		}
		return w
	}
	own, other := csrPEM(t, "system:node:n1"), csrPEM(t, "system:node:n2")
	run(t, clusterAdmitter(t, nil), map[string]write{
		"serving certificate of its own":    csr(admissionv1.Create, kubeletServingSigner, own, ""),
		"client certificate of its own":     csr(admissionv1.Create, kubeletClientSigner, own, ""),
		"serving certificate of another":    csr(admissionv1.Create, kubeletServingSigner, other, "CN=system:node:n2"),
		"client certificate of another":     csr(admissionv1.Create, kubeletClientSigner, other, "CN=system:node:n2"),
		"serving certificate of no node":    csr(admissionv1.Create, kubeletServingSigner, csrPEM(t, "admin"), "CN=admin"),
		"a request that does not parse":     csr(admissionv1.Create, kubeletServingSigner, []byte("not pem"), "does not parse"),
		"another signer judges its own":     csr(admissionv1.Create, "example.com/signer", other, ""),
		"updates are the signer's to check": csr(admissionv1.Update, kubeletServingSigner, other, ""),
	})
}
