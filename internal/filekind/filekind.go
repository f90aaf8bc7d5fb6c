// Package filekind names the kind of a file that is not a regular one, for
// error messages ("a directory", not "d---------").
package filekind

import "io/fs"

// kinds pairs mode bits with their names, in the order Of tries them.
var kinds = []struct {
	bit  fs.FileMode
	name string
}{
	{fs.ModeDir, "a directory"}, {fs.ModeSymlink, "a symbolic link"}, {fs.ModeNamedPipe, "a named pipe"},
	{fs.ModeSocket, "a socket"}, {fs.ModeDevice, "a device"}, {fs.ModeIrregular, "an irregular file"},
}

// Of names the kind of file m describes: "a directory", "a symbolic link",
// "a named pipe", "a socket", "a device", or "a regular file".
func Of(m fs.FileMode) string {
	for _, k := range kinds {
		if m.Type()&k.bit != 0 {
			return k.name
		}
	}
	if m.Type() == 0 {
		return "a regular file"
	}
	return "not a regular file"
}
