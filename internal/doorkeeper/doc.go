// Package doorkeeper lets a cache admit an entry on its second sighting
// only, as TinyLFU's doorkeeper does: inputs that never repeat (most edits,
// administrators' one-off writes) would otherwise fill a bounded cache with
// entries never asked for again, pushing out the ones that repeat.
package doorkeeper
