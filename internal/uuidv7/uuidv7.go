// Package uuidv7 generates RFC 9562 version 7 UUIDs: a 48-bit Unix
// millisecond timestamp followed by random bits, so ids sort by creation
// time and are unique without coordination.
package uuidv7

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"
)

// Fill writes a fresh UUIDv7 into each element of ids, reading the random
// bits for all of them at once.
func Fill(ids [][16]byte, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	random := make([]byte, 10*len(ids))
	if _, err := rand.Read(random); err != nil {
		return fmt.Errorf("seqbox: read random bytes: %w", err)
	}
	ms := uint64(now.UnixMilli())
	for i := range ids {
		var head [8]byte
		binary.BigEndian.PutUint64(head[:], ms<<16)
		id := &ids[i]
		copy(id[0:6], head[0:6])
		copy(id[6:], random[10*i:10*i+10])
		id[6] = 0x70 | id[6]&0x0f // version 7
		id[8] = 0x80 | id[8]&0x3f // RFC 9562 variant
	}
	return nil
}
