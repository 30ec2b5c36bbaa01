// Package bench measures quality versus compute for every decoding mode, and
// the speed of the forward pass and the search.
package bench
