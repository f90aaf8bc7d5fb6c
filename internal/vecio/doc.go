// Package vecio reads the vector files benchmarks and tools exchange:
// .fvecs, .bvecs and .ivecs (each row: int32 dimension, then the values)
// and NumPy .npy arrays (C order; float32, uint8, int32, int64). A vecs
// file is whole records of its first record's dimension, an .npy header
// exactly its data's size; errors name the file and the record.
package vecio
