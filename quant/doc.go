// Package quant builds and serves compressed in-memory copies ("codes") of
// a FAISS float index's vectors, for the on_disk loading mode: the HNSW
// search walks the file's unchanged graph on estimated distances computed
// from the codes, and reads full vectors only to rerank a short list.
//
// Six levels: 4x stores one byte per dimension (8-bit scalar
// quantization on each dimension's [min, max] in the file); 5x and 6x
// store 6 and 5 bits per dimension on trained ranges (8x's nibbles plus
// bit planes of the low bits, and ‖x̂‖²); 8x stores
// four bits per dimension, two a byte, on per-dimension ranges trained to
// the least quantization error of a sample (outliers clamp rather than
// widen every step); 32x stores one bit per dimension of the vector's
// residual from the nearest of up to 32,768 k-means centroids after a
// random rotation, plus three float32 factors that make the distance
// estimate unbiased and the centroid's number (the RaBitQ family); 16x
// the same with two bits per dimension. Estimates follow the search's convention:
// smaller is nearer, squared L2, or −inner product.
//
// Codes live off the Go heap (internal/offheap), one contiguous row per
// vector so an estimate touches one or a few cache lines; a Query holds
// the per-query state and allocates nothing per distance. Build derives
// codes from the file in one sequential pass (after a small training
// sample); Write and Load persist them as a guide file that names the
// source file's identity and carries a CRC-32C, so a stale or damaged
// guide is refused (ErrStale, ErrCorrupt) rather than used.
// docs/quantization.md describes the estimators, the file format and the
// measured recall.
package quant
