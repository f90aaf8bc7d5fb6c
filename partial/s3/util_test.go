package s3_test

import (
	"unsafe"

	"github.com/faiss-sidecar/faiss-sidecar/partial/s3"
)

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// client opens the tests' objects: one for the package, as a program has.
var client = s3.NewClient(s3.Options{})
