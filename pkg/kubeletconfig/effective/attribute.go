package effective

import (
	"fmt"
)

// attributor tells what set a running value, from the kubelet's files and
// flags as Observed holds them.
type attributor struct {
	obs Observed
	// wanted is the configuration asked, normalised.
	wanted map[string]any
	// files caches the files' fields; nil for one that does not parse.
	files []map[string]any
}

func (a *attributor) fields() []map[string]any {
	if a.files == nil {
		a.files = make([]map[string]any, len(a.obs.Files))
		for i, f := range a.obs.Files {
			// A file that does not parse is one the kubelet refused; it
			// sets nothing that runs.
			a.files[i], _ = fieldMap(f.Data)
		}
	}
	return a.files
}

// source says what set the running value at p; "" when the agent cannot
// tell at all.
func (a *attributor) source(p path, running any, present bool) string {
	obs := a.obs
	if obs.NotReadingOwn != "" {
		return obs.NotReadingOwn
	}
	last := -1
	for i, fields := range a.fields() {
		if fields != nil && sets(fields, p) {
			last = i
		}
	}
	if last >= 0 && !obs.Files[last].Own {
		f := obs.Files[last]
		if f.DropIn {
			return fmt.Sprintf("set by drop-in %s, which the kubelet merges after the agent's file", f.Path)
		}
		return fmt.Sprintf("set by the kubelet's --config file %s", f.Path)
	}
	if last >= 0 {
		own := obs.Files[last]
		if ownFields, err := normalized(own.Data, true); err == nil {
			said, ok := lookup(ownFields, p)
			want, _ := lookup(a.wanted, p)
			if ok && !sameValue(said, want) {
				return fmt.Sprintf("the agent's file %s was changed since the agent wrote it: it says %s", own.Path, show(said, true))
			}
		}
	}
	flag := flagFor(p)
	if flag != "" && present {
		if value, ok := obs.Flags[flag]; ok && flagShows(value, p, running) {
			return fmt.Sprintf("set by the kubelet's command line: --%s=%s", flag, value)
		}
	}
	switch {
	case flag != "" && obs.Flags == nil:
		return fmt.Sprintf("not by the kubelet's files: a flag on its command line (--%s), or the kubelet has not read its files since they changed", flag)
	default:
		return "not by the kubelet's files or flags: the kubelet has not read its files since they changed"
	}
}
