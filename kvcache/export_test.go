package kvcache

// Exported for the external tests (property_test.go), which run the
// shared operation machine of package kvcachetest.
var (
	CheckInvariants = checkInvariants
	WriteSlot       = writeSlot
	ReadSlot        = readSlot
	PoisonFree      = poisonFree
)
