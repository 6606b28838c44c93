// Package certs mints the certificates nodeguard runs on: a CA and the
// webhook's serving certificate under it, and a second CA with the client
// certificate kube-apiserver presents to the webhook.
//
// Two CAs, not one, because they are trusted by different parties for
// different things: the serving CA is installed in the apiserver (caBundle,
// the authorization webhook's kubeconfig) to trust the webhook, the client CA
// in the webhook (--client-ca-file) to trust the apiserver. With one CA, the
// webhook's serving key would be one signature away from a certificate the
// webhook accepts as the apiserver.
//
// WriteBundle lays the files out as the static-certs overlay and the
// control-plane templates expect them (see the *File constants), and never
// replaces an existing file unless told to. cmd/nodeguard-certs is its
// command line; test/controlplane uses the CA for throwaway test PKIs.
package certs
