package cpusample

import (
	"sort"

	"github.com/gpufeed/gpufeed/internal/profile"
)

func sortSyms(ss []profile.SymbolSamples) {
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].Samples != ss[j].Samples {
			return ss[i].Samples > ss[j].Samples
		}
		if ss[i].File != ss[j].File {
			return ss[i].File < ss[j].File
		}
		return ss[i].Symbol < ss[j].Symbol
	})
}
