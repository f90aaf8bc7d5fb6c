package partial

import "io/fs"

// OpenOption changes how a file is opened (OpenFile, OpenMmap,
// OpenDirect, OpenMemoryAligned).
type OpenOption func(*openOptions)

type openOptions struct{ name string }

// Named has the storage name its file name, not by its path, in every
// error it returns, those of the open included: the name its caller knows
// the file by (a path as a client sent it, resolved by a server inside a
// directory the client is not told of). The path is still what is opened
// and checked for changes.
func Named(name string) OpenOption { return func(o *openOptions) { o.name = name } }

// NameOf is the name a file opened at path with opts goes by in errors:
// Named's, else the path.
func NameOf(path string, opts ...OpenOption) string {
	o := openOptions{name: path}
	for _, opt := range opts {
		opt(&o)
	}
	if o.name == "" {
		return path
	}
	return o.name
}

// NameError is err, returned by an operation on the file at path, naming
// the file as name when it is an *fs.PathError (what package os returns).
func NameError(err error, path, name string) error {
	if pe, ok := err.(*fs.PathError); ok && pe.Path == path && name != path {
		return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
	}
	return err
}
