package dialect

import (
	"fmt"
	"unicode/utf8"
)

// MaxErrorTextLen bounds the error text stored for a failed or
// dead-lettered message, in bytes.
const MaxErrorTextLen = 4096

// ErrorText makes text from anywhere (a handler's error, a driver's
// message, a payload echoed back) storable on every database: bun refuses
// NUL in string values on PostgreSQL and SQLite, MySQL strips it, and a
// strict MySQL refuses invalid UTF-8. NUL and every byte that is not valid
// UTF-8 become the four characters \xNN, so nothing is lost silently, and the
// result is cut to MaxErrorTextLen bytes on a rune boundary. It is
// idempotent: its output is returned unchanged.
//
// The statements that store error text apply it to every value they bind,
// so a failure can always be recorded and the partition never wedges on it.
func ErrorText(s string) string {
	if clean(s) {
		return cut(s)
	}
	b := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s) && len(b) < MaxErrorTextLen; {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == 0:
			b = fmt.Appendf(b, `\x%02x`, s[i])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return cut(string(b))
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return false
		}
	}
	return utf8.ValidString(s)
}

// cut shortens valid UTF-8 to MaxErrorTextLen bytes without splitting a rune.
func cut(s string) string {
	if len(s) <= MaxErrorTextLen {
		return s
	}
	n := MaxErrorTextLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ErrorString is err's text, safe to call on any error: fmt recovers a
// panicking Error method (a typed nil pointer returned as error, say), which
// a direct call would not.
func ErrorString(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprint(err)
}
