// Package settings is nodeguard's settings file: the settings operators
// change at run time (minimum kubelet version, whether nodes may assign
// their own configuration, which KubeletConfiguration fields may not change
// dynamically, which users are exempt from content checks). Its kind is
// NodeguardPolicy, the webhook's flag --settings; everywhere else it is
// "settings", so that "policy" names the Rego engine (pkg/policy) only.
//
// The file is versioned and decoded strictly, so a typo is an error rather
// than a silently ignored setting. A Watcher reloads it when it changes and
// keeps the last good settings when a reload fails, reporting the failure in
// logs, metrics and a readiness check's detail.
package settings
