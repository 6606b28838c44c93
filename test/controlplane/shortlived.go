package controlplane

import "time"

// IssueClientCertValidFor issues a TLS client certificate that expires
// validity from now, for tests of certificate rotation: a node certificate
// that is about to expire, as the kubelet's is when it rotates.
func (ca *CA) IssueClientCertValidFor(validity time.Duration, commonName string, organizations ...string) (certPEM, keyPEM []byte, err error) {
	return ca.ca.IssueClientCert(validity, commonName, organizations...)
}
