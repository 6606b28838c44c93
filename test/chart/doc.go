// Package chart tests charts/nodeguard, the Helm chart, against manifests/,
// the kustomize overlays: one source of truth. For every setting the two
// share (the certificate overlays, the standalone component, the monitoring
// component, the images by digest) it renders both, the chart with helm
// template (Helm v4, built by hack/testbin.sh) and the overlays with the
// kustomize API, and fails on any difference, naming the object and the
// field. It also lints the chart, and checks that values the chart cannot
// honour are refused with an error that says why.
//
// Installing the chart on a control plane with real kubelets is
// test/e2e/install's TestHelmInstall.
package chart
