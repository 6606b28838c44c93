// Package alerts tests nodeguard's Prometheus alerts
// (manifests/components/monitoring/prometheusrule.yaml, which the chart
// renders the same) with promtool, built from the Go module proxy by
// hack/testbin.sh: `promtool check rules` on the rules, then `promtool test
// rules` on the series testdata/*_test.yaml write, in which every alert
// fires on its case and stays quiet on the healthy one. It also checks that
// every alert has such a pair of cases, and that its runbook_url names a
// section of docs/install.md.
package alerts
