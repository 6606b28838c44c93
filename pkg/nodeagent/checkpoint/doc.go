// Package checkpoint is the node agent's crash-safe state directory: the
// ConfigMap payloads it downloaded (checkpoints, keyed by UID and
// resourceVersion) and the small records that point at them (assigned,
// last-known-good, active, trial, bad).
//
// # Layout
//
//	STATE_DIR/
//	  checkpoints/<uid>_<resourceVersion>.json   one downloaded configuration each
//	  assigned                                   ref: what the apiserver assigned
//	  last-known-good                            ref: the config that last survived a trial
//	  active                                     what the kubelet was last restarted with
//	  trial                                      the config on trial, its boot ID and start
//	  drain                                      the drain in progress and the change it is for
//	  bad                                        configs that failed their trial
//	  kubelet-version                            the kubelet version the Node last reported
//	  corrupt/                                   files that failed their checks, moved aside
//
// Every file is an envelope: a JSON object whose "body" is covered by a
// SHA-256 checksum stored next to it. A truncated, corrupted or hand-edited
// file, or a checkpoint whose body names another UID/resourceVersion than its
// file name (a wrongly placed file), fails the check, is moved to corrupt/
// with a timestamp suffix and is reported as ErrCorrupt: callers fall back,
// nothing panics.
//
// # Crash safety
//
// Each write goes through pkg/durable: a temporary file in the
// same directory, fsynced and renamed over the target, then an fsync of the
// directory, so the rename itself survives a power cut. A ref is only ever set to a checkpoint that is already
// durable, and setters refuse a reference whose checkpoint is missing. A crash
// at any step therefore leaves either the old or the new file, never a partial
// one; temporary files a crash leaves behind are removed by Open.
//
// File names never come from ConfigMap keys or names: a checkpoint is named by
// UID and resourceVersion, both checked against a narrow alphabet first.
//
// Tests inject failures between the steps of a write through
// Options.Failpoint; durable.ErrSimulatedCrash makes the store stop as a
// killed process would, without cleaning up.
package checkpoint
