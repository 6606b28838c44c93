// Package config is nodeguard's policy file: the settings operators change
// at run time (minimum kubelet version, whether nodes may assign their own
// configuration, which KubeletConfiguration fields may not change
// dynamically, which users are exempt from content checks).
//
// The file is versioned and decoded strictly, so a typo is an error rather
// than a silently ignored setting. A Watcher reloads it when it changes and
// keeps the last good policy when a reload fails, reporting the failure in
// logs, metrics and a readiness check's detail.
package config
