package outbox

import (
	"hash/fnv"
	"unicode/utf8"
)

// Limits.
const (
	MaxQueueNameLen   = 64
	MaxPayloadTypeLen = 255
	MaxDedupKeyLen    = 255
	MinPartitions     = 1
	MaxPartitions     = 4096
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

// ValidateDedupKey checks a message's DedupKey: empty (none), or at most
// MaxDedupKeyLen bytes of valid UTF-8 (operators read keys in tools).
func ValidateDedupKey(k string) error {
	if len(k) > MaxDedupKeyLen || !utf8.ValidString(k) {
		return ErrInvalidDedupKey
	}
	return nil
}

// PartitionForKey is the partition a Key maps to among a queue's
// partitions: FNV-1a (32-bit) of the key's bytes, modulo the partition
// count. It is part of the stored format: it never changes, so a key keeps
// its partition across releases. Partition counts are 1..MaxPartitions; for
// a count below 1 it returns 0 (as for a single partition), never panics.
func PartitionForKey(key string, partitions int) int {
	if partitions <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}
