package outbox

import (
	"hash/fnv"
)

// Limits.
const (
	MaxQueueNameLen   = 64
	MaxPayloadTypeLen = 255
	MinPartitions     = 1
	MaxPartitions     = 1024
)

// ValidateQueueName checks ^[A-Za-z0-9]([A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$.
func ValidateQueueName(name string) error {
	if len(name) == 0 || len(name) > MaxQueueNameLen {
		return &QueueNameError{Name: name}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		edge := i == 0 || i == len(name)-1
		if !alnum && (edge || (c != '.' && c != '_' && c != '-')) {
			return &QueueNameError{Name: name}
		}
	}
	return nil
}

// ValidatePayloadType checks 1..255 printable ASCII characters (0x20..0x7e).
func ValidatePayloadType(t string) error {
	if len(t) == 0 || len(t) > MaxPayloadTypeLen {
		return ErrInvalidPayloadType
	}
	for i := 0; i < len(t); i++ {
		if t[i] < 0x20 || t[i] > 0x7e {
			return ErrInvalidPayloadType
		}
	}
	return nil
}

// PartitionForKey is the partition a Key maps to: FNV-1a (32-bit) of the
// key's bytes, modulo the partition count. It is part of the stored format:
// it never changes, so a key keeps its partition across releases.
func PartitionForKey(key string, partitions int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}
