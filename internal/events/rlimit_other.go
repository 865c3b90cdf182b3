//go:build !unix

package events

// DescriptorLimit is 0 here: the limit on open descriptors cannot be read.
func DescriptorLimit() uint64 { return 0 }
