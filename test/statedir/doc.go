// Package statedir reads a node agent's state directory
// (pkg/nodeagent/checkpoint) the way a starting agent would, but changing
// nothing, and names every problem it finds: for the tests that kill the
// agent (test/e2e/agent's TestPowerLoss, test/e2e/drain) and the state
// machine's own tests, which check that a directory left at any moment is
// one the agent takes as is.
//
// The checks are the agent's own: Inspect copies the directory and reads
// the copy with the checkpoint Store's readers, so a file they would move
// aside is reported instead, and the copy is removed. What the readers do
// not check, Inspect does against the layout documented in
// pkg/nodeagent/checkpoint: no file the agent never writes, each
// checkpoint under the name of the configuration it holds, and every record
// pointing at a sound checkpoint.
package statedir
