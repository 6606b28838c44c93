// Package durable writes and removes nodeguard's files (the agent's
// checkpoints and kubelet configuration, the certificates nodeguard-certs
// mints) so that a crash or a power cut at any moment leaves either the old
// file or the new one, never a partial one, and so that a completed change
// survives the power cut.
//
// WriteFile writes a temporary file beside the target
// (github.com/google/renameio/v2), fsyncs it, renames it over the target and
// fsyncs the directory, since a rename is only durable once its directory
// is. Remove unlinks a file and fsyncs its directory. A kill before the
// rename leaves the temporary file behind; its owner removes such leftovers
// at start-up with RemoveTemps, before its first write.
//
// Tests inject crashes between the steps through a Failpoint: returning
// ErrSimulatedCrash from it stops the operation there without cleaning up,
// as a killed process would.
package durable
