package outbox

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMessageIDRoundTrip(t *testing.T) {
	id := MessageID{0x01, 0x92, 0xf1, 0xa4, 0x7b, 0x3c, 0x7d, 0x2e, 0x9f, 0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f}
	got, err := ParseMessageID(id.String())
	if err != nil || got != id {
		t.Fatalf("ParseMessageID(%s) = %v, %v", id, got, err)
	}
	got, err = ParseMessageID(strings.ToUpper(id.String()))
	if err != nil || got != id {
		t.Fatalf("upper case: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0192f1a4", "0192f1a4-7b3c-7d2e-9f00-1a2b3c4d5e6", "0192f1a4x7b3c-7d2e-9f00-1a2b3c4d5e6f", "0192f1a4-7b3c-7d2e-9f00-1a2b3c4d5e6g"} {
		if _, err := ParseMessageID(bad); !errors.Is(err, ErrInvalidMessageID) {
			t.Errorf("ParseMessageID(%q) = %v, want ErrInvalidMessageID", bad, err)
		}
	}
}

func FuzzParseMessageID(f *testing.F) {
	f.Add("0192f1a4-7b3c-7d2e-9f00-1a2b3c4d5e6f")
	f.Add("0192F1A4-7B3C-7D2E-9F00-1A2B3C4D5E6F")
	f.Add("not-a-uuid")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseMessageID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessageID) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if id.String() != strings.ToLower(s) {
			t.Fatalf("%q parsed to %s", s, id)
		}
	})
}
