package admission

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
)

// The signers whose certificates name a node: its serving certificate and
// its client certificate to the apiserver.
const (
	kubeletServingSigner = "kubernetes.io/kubelet-serving"
	kubeletClientSigner  = "kubernetes.io/kube-apiserver-client-kubelet"
)

// admitCSR is NodeRestriction's CertificateSigningRequest rule: a node asks
// for a kubelet serving or kubelet client certificate only in its own name
// (CN system:node:NAME). With another node's name, once signed, it could
// serve as that node to the apiserver's exec and logs requests, or act as
// that node toward the apiserver. Other signers check their own requests;
// NodeRestriction judges only creation.
func admitCSR(req *Request, nodeName string) Result {
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return allow()
	}
	csr, err := required[certificatesv1.CertificateSigningRequest](req.Obj, "object")
	if err != nil {
		return refuse(RuleMalformed, "%v", err)
	}
	if csr.Spec.SignerName != kubeletServingSigner && csr.Spec.SignerName != kubeletClientSigner {
		return allow()
	}
	request, err := parseCSR(csr.Spec.Request)
	if err != nil {
		return refuse(RuleNodeCSRs, "node %q asked signer %s to sign a request that does not parse: %v", nodeName, csr.Spec.SignerName, err)
	}
	if want := "system:node:" + nodeName; request.Subject.CommonName != want {
		return refuse(RuleNodeCSRs, "node %q may ask signer %s only for CN=%s, not CN=%s", nodeName, csr.Spec.SignerName, want, request.Subject.CommonName)
	}
	return allow()
}

// parseCSR reads a PEM "CERTIFICATE REQUEST" block, as the signers do.
func parseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no PEM block of type CERTIFICATE REQUEST")
	}
	request, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate request: %w", err)
	}
	return request, nil
}
