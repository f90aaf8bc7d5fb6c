// Package filekind names the kind of a file that is not a regular one, for
// error messages ("a directory", not "d---------").
package filekind

import "io/fs"

// Of names the kind of file m describes: "a directory", "a symbolic link",
// "a named pipe", "a socket", "a device", or "a regular file".
func Of(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t&fs.ModeIrregular != 0:
		return "an irregular file"
	case t == 0:
		return "a regular file"
	}
	return "not a regular file"
}
