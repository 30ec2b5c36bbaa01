package synth

// MoreBits is moreBits, for the tests.
var MoreBits = moreBits
