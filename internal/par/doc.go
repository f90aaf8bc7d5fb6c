// Package par runs independent loop iterations on a bounded number of
// goroutines.
package par
