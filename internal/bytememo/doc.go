// Package bytememo remembers values by byte-string keys (an encoded input,
// an object's JSON): a seeded digest finds the entry, a full comparison
// confirms it (equal digests are not equal keys), and a key is admitted on
// its second sighting only (internal/doorkeeper), so that one-off inputs
// never push out the ones that repeat. Keys are copied in: a caller's
// buffer may be reused as soon as a call returns.
package bytememo
