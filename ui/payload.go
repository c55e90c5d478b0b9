package ui

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// payloadView is a payload as the UI shows it: pretty-printed JSON, text,
// or a hex dump of binary; html/template escapes Text wherever it goes.
type payloadView struct {
	Kind string // "json", "text", "binary" or "empty"
	Text string
	Size int
}

// maxShownPayload bounds what a page renders of one payload; the rest is
// summarised by its size.
const maxShownPayload = 64 << 10

func viewPayload(p []byte) payloadView {
	v := payloadView{Size: len(p)}
	if len(p) == 0 {
		v.Kind = "empty"
		return v
	}
	shown := p[:min(len(p), maxShownPayload)]
	var buf bytes.Buffer
	switch {
	case len(shown) == len(p) && json.Valid(p) && json.Indent(&buf, p, "", "  ") == nil:
		v.Kind, v.Text = "json", buf.String()
	case utf8.Valid(shown):
		v.Kind, v.Text = "text", string(shown)
	default:
		v.Kind, v.Text = "binary", hex.Dump(shown)
	}
	return v
}

// preview is a payload's first line, cut to n runes, for a table cell.
func preview(p []byte, n int) string {
	if !utf8.Valid(p) {
		return hex.EncodeToString(p[:min(len(p), n/2)])
	}
	s := string(p)
	if i := bytes.IndexAny(p, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		s = string(r[:n]) + "…"
	}
	return s
}
