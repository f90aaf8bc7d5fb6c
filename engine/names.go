package engine

import (
	"path/filepath"

	"github.com/faiss-sidecar/faiss-sidecar/partial/storage"
)

// A front end names files as its user knows them (Spec.Label,
// VectorsLabel, RerankSpec.Label, GuideDirLabel), which need not be the
// paths opened: a server resolves a client's path inside a data root it
// does not tell. Every layer that opens a file is given its name
// (storage.Options.Name, partial.Named, quant.LoadAs) and builds its
// errors with it; these are the names of the files the engine places
// itself.

// guideName is what messages call the guide of spec's index at level,
// which GuidePath places: in GuideDir, GuideDirLabel/its name; beside the
// index, the index's label with the guide's suffix; elsewhere (an
// object's guide in RemoteGuideDir), its path.
func guideName(spec *Spec, level string) string {
	path := GuidePath(spec.GuideDir, spec.Path, level)
	switch {
	case spec.GuideDir != "" && spec.GuideDirLabel != "":
		return spec.GuideDirLabel + "/" + filepath.Base(path)
	case spec.GuideDir != "", storage.IsRemote(spec.Path), spec.Label == spec.Path:
		return path
	}
	return spec.Label + "." + level + ".guide"
}
